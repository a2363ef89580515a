-- count_task: a start-up run's count of a task without claims
-- $1 workflow
-- $2 task
-- $3 from
SELECT count(*) FROM "app"."reports" AS b LEFT JOIN LATERAL (
		-- LIMIT 1 keeps this a probe of the primary key per row,
		-- whatever the planner thinks of the table's size.
		(SELECT a.ctid AS tid, a.attempt, a.nodes, a.state, a.since, a.stamp,
			CASE WHEN a.state IN ('waiting', 'held') THEN false ELSE false END AS again
		FROM "enginehealth".attempts AS a
		WHERE a.workflow = $1 AND a.instance = b."id"::text AND a.task = $2 LIMIT 1)
		UNION ALL
		(SELECT NULL::tid, max(c.attempt), coalesce((SELECT array_agg(u.n ORDER BY u.i) FROM (
				SELECT DISTINCT ON (v.n) v.n, v.i FROM unnest(array_agg(c.node ORDER BY c.id) FILTER (WHERE c.node IS NOT NULL))
					WITH ORDINALITY AS v(n, i) ORDER BY v.n, v.i) AS u), '{}'), 'retried', NULL::timestamptz, NULL::timestamptz, false
		FROM (SELECT e.id, e.kind, e.attempt, e.node, max(e.id) FILTER (WHERE e.kind = 'retry_succeeded') OVER () AS settled
			FROM "enginehealth".events AS e
			WHERE e.instance = b."id"::text AND e.workflow = $1 AND e.task = $2
			  AND (e.kind = 'retry_succeeded' OR e.kind = 'instance_repaired' AND e.attempt IS NOT NULL)) AS c
		WHERE c.kind = 'instance_repaired' AND c.id > coalesce(c.settled, 0)
		HAVING count(*) > 0)
		LIMIT 1) AS a ON true
WHERE b."state" = $3 AND TRUE AND (a.state IS NULL OR a.state NOT IN ('waiting', 'held') OR a.again)
