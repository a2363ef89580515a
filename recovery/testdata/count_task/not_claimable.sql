-- count_task: a start-up run's count of a task without claims
-- $1 from
-- $2 workflow
-- $3 task
-- In three counts, each cheap where its rows are few (one snapshot: the
-- statement's): the instances in the state, less those claimed (read
-- from the claims), less those parked and not run again since, unclaimed
-- (a join with the parked rows: an instance has at most one attempts row
-- of the task, its primary key). One anti-join of every instance in the
-- state with the claims and the attempts rows took three times as long
-- where nothing is parked; with 100k parked the two take about as long.
SELECT (SELECT count(*) FROM "app"."reports" AS b WHERE b."state" = $1)
	- (SELECT count(*) FROM "app"."reports" AS b WHERE b."state" = $1 AND FALSE)
	-- Parked: an attempts row waiting or held whose instance did not
	-- run again since (the repair's pick, Decidable).
	- (SELECT count(*) FROM "app"."reports" AS b JOIN "enginehealth"."attempts" AS a ON a.instance = b."id"::text
		WHERE a.workflow = $2 AND a.task = $3 AND (a.state = 'waiting' OR a.state = 'held') AND NOT false
		  AND b."state" = $1 AND TRUE)
