-- count_task: the count of the instances whose claims the run expired
-- $1 workflow
-- $2 from
-- $3 task
-- $4 ids
SELECT count(*) FROM "app"."invoices" AS b LEFT JOIN LATERAL (
		-- LIMIT 1 keeps this a probe of the primary key per row,
		-- whatever the planner thinks of the table's size.
		(SELECT a.ctid AS tid, a.attempt, a.nodes, a.state, a.since, a.stamp,
			CASE WHEN a.state IN ('waiting', 'held') THEN EXISTS (SELECT 1 FROM "enginehealth".events e WHERE e.kind = 'claim_expired' AND e.workflow = $1 AND e.instance = b."id"::text AND e.from_state = $2 AND e.at > a.since) ELSE false END AS again
		FROM "enginehealth".attempts AS a
		WHERE a.workflow = $1 AND a.instance = b."id"::text AND a.task = $3 LIMIT 1)
		UNION ALL
		(SELECT NULL::tid, max(c.attempt), coalesce((SELECT array_agg(u.n ORDER BY u.i) FROM (
				SELECT DISTINCT ON (v.n) v.n, v.i FROM unnest(array_agg(c.node ORDER BY c.id) FILTER (WHERE c.node IS NOT NULL))
					WITH ORDINALITY AS v(n, i) ORDER BY v.n, v.i) AS u), '{}'), 'retried', NULL::timestamptz, NULL::timestamptz, false
		FROM (SELECT e.id, e.kind, e.attempt, e.node, max(e.id) FILTER (WHERE e.kind = 'retry_succeeded') OVER () AS settled
			FROM "enginehealth".events AS e
			WHERE e.instance = b."id"::text AND e.workflow = $1 AND e.task = $3
			  AND (e.kind = 'retry_succeeded' OR e.kind = 'instance_repaired' AND e.attempt IS NOT NULL)) AS c
		WHERE c.kind = 'instance_repaired' AND c.id > coalesce(c.settled, 0)
		HAVING count(*) > 0)
		LIMIT 1) AS a ON true
WHERE b."status" = $2 AND NOT EXISTS (SELECT 1 FROM "app"."invoice_claim" c WHERE c."instance_id" = b."id") AND b."id" = ANY ($4) AND (a.state IS NULL OR a.state NOT IN ('waiting', 'held') OR a.again)
