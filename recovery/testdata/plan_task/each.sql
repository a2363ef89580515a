-- plan_task: the plan of the same task instance by instance (planEach: the tests compare it with the run)
-- $1 patterns
-- $2 workflow
-- $3 from
-- $4 task
SELECT x.id, x.prev, x.match, 1 AS n FROM (
	SELECT b."id"::text AS id, coalesce(CASE WHEN a.state = 'succeeded' THEN 0 WHEN a.again AND a.state = 'waiting' THEN a.attempt + 1 ELSE a.attempt END, 0) AS prev,
		coalesce((SELECT u.i FROM unnest($1::text[]) WITH ORDINALITY AS u(p, i)
			WHERE b."last_error"::text ~ u.p ORDER BY u.i LIMIT 1), 0) AS match
	FROM "app"."invoices" AS b LEFT JOIN LATERAL (
		-- LIMIT 1 keeps this a probe of the primary key per row,
		-- whatever the planner thinks of the table's size.
		(SELECT a.ctid AS tid, a.attempt, a.nodes, a.state, a.since, a.stamp,
			CASE WHEN a.state IN ('waiting', 'held') THEN (EXISTS (SELECT 1 FROM "enginehealth"."events" e WHERE e.kind = 'claim_expired' AND e.workflow = $2 AND e.instance = b."id"::text AND e.from_state = $3 AND e.at > a.since) OR EXISTS (SELECT 1 FROM "app"."invoice_claim" c WHERE c."instance_id" = b."id")) ELSE false END AS again, a.last_attempt_at AS last_at, a.last_node
		FROM "enginehealth"."attempts" AS a
		WHERE a.workflow = $2 AND a.instance = b."id"::text AND a.task = $4 LIMIT 1)
		UNION ALL
		(SELECT NULL::tid, h.attempt, h.nodes, 'retried', NULL::timestamptz, NULL::timestamptz, false, h.last_at, h.last_node FROM (
		SELECT e.instance, max(e.attempt) AS attempt, coalesce((SELECT array_agg(u.n ORDER BY u.i) FROM (
			SELECT DISTINCT ON (v.n) v.n, v.i FROM unnest(array_agg(e.node ORDER BY e.id) FILTER (WHERE e.node IS NOT NULL))
				WITH ORDINALITY AS v(n, i) ORDER BY v.n, v.i) AS u), '{}') AS nodes,
		max(e.at) AS last_at, (array_agg(e.node ORDER BY e.id DESC) FILTER (WHERE e.node IS NOT NULL))[1] AS last_node
		FROM "enginehealth"."events" AS e
		WHERE e.instance = b."id"::text AND e.workflow = $2 AND e.task = $4
		  AND e.kind = 'instance_repaired' AND e.attempt IS NOT NULL
		GROUP BY e.instance) AS h)
		LIMIT 1) AS a ON true
	WHERE b."status" = $3 AND NOT EXISTS (SELECT 1 FROM "app"."invoice_claim" c WHERE c."instance_id" = b."id" AND c."expires_at" >= now()) AND (a.state IS NULL OR a.state NOT IN ('waiting', 'held') OR a.again)
) AS x ORDER BY x.id
