-- count_task: a start-up run's count of a task without claims
-- $1 from
-- $2 workflow
-- $3 task
SELECT count(*) FROM "app"."reports" AS b
WHERE b."state" = $1 AND TRUE
	-- Not parked: no attempts row waiting or held whose instance did
	-- not run again since (the repair's pick, Decidable, as an
	-- anti-join: a probe of the primary key per instance, or one read
	-- of the parked rows through their partial indexes, as the planner
	-- finds cheaper).
	AND NOT EXISTS (SELECT 1 FROM "enginehealth"."attempts" AS a
		WHERE a.workflow = $2 AND a.instance = b."id"::text AND a.task = $3
		  AND (a.state = 'waiting' OR a.state = 'held') AND NOT false)
