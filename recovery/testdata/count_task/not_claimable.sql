-- count_task: a start-up run's count of a task without claims
-- $1 workflow
-- $2 task
-- $3 from
SELECT count(*) FROM "app"."reports" AS b LEFT JOIN LATERAL (
		-- LIMIT 1 keeps this a probe of the primary key per row,
		-- whatever the planner thinks of the table's size.
		(SELECT a.ctid AS tid, a.attempt, a.nodes, a.state, a.since, a.stamp,
			CASE WHEN a.state IN ('waiting', 'held') THEN false ELSE false END AS again, a.last_attempt_at AS last_at, a.last_node
		FROM "enginehealth".attempts AS a
		WHERE a.workflow = $1 AND a.instance = b."id"::text AND a.task = $2 LIMIT 1)) AS a ON true
WHERE b."state" = $3 AND TRUE AND (a.state IS NULL OR a.state NOT IN ('waiting', 'held') OR a.again)
