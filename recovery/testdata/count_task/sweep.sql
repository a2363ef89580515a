-- count_task: a sweep's count of a claimable task's interrupted instances
-- $1 workflow
-- $2 from
-- $3 task
SELECT count(*) FROM "app"."invoices" AS b LEFT JOIN LATERAL (
		-- LIMIT 1 keeps this a probe of the primary key per row,
		-- whatever the planner thinks of the table's size.
		(SELECT a.ctid AS tid, a.attempt, a.nodes, a.state, a.since, a.stamp,
			CASE WHEN a.state IN ('waiting', 'held') THEN EXISTS (SELECT 1 FROM "enginehealth".events e WHERE e.kind = 'claim_expired' AND e.workflow = $1 AND e.instance = b."id"::text AND e.from_state = $2 AND e.at > a.since) ELSE false END AS again, a.last_attempt_at AS last_at, a.last_node
		FROM "enginehealth".attempts AS a
		WHERE a.workflow = $1 AND a.instance = b."id"::text AND a.task = $3 LIMIT 1)) AS a ON true
WHERE b."status" = $2 AND NOT EXISTS (SELECT 1 FROM "app"."invoice_claim" c WHERE c."instance_id" = b."id") AND (a.state IS NULL OR a.state NOT IN ('waiting', 'held') OR a.again)
