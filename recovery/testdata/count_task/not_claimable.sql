-- count_task: a start-up run's count of a task without claims
-- $1 from
-- $2 workflow
-- $3 task
-- In three counts, each cheap where its rows are few (one snapshot: the
-- statement's): the instances in the state, less those claimed (read
-- from the claims), less those parked and not run again since, unclaimed
-- (read from the parked rows). One anti-join of every instance in the
-- state with the claims and the attempts rows cost three times as much.
-- (An instance has at most one attempts row of the task: its primary key.)
SELECT (SELECT count(*) FROM "app"."reports" AS b WHERE b."state" = $1)
	- (SELECT count(*) FROM "app"."reports" AS b WHERE b."state" = $1 AND FALSE)
	-- Parked: an attempts row waiting or held whose instance did not
	-- run again since (the repair's pick, Decidable).
	- (SELECT count(*) FROM "enginehealth"."attempts" AS a
		WHERE a.workflow = $2 AND a.task = $3 AND (a.state = 'waiting' OR a.state = 'held') AND NOT false
		  AND EXISTS (SELECT 1 FROM "app"."reports" AS b WHERE b."id"::text = a.instance AND b."state" = $1 AND TRUE))
