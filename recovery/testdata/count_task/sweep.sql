-- count_task: a sweep's count of a claimable task's interrupted instances
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
SELECT (SELECT count(*) FROM "app"."invoices" AS b WHERE b."status" = $1)
	- (SELECT count(*) FROM "app"."invoices" AS b WHERE b."status" = $1 AND EXISTS (SELECT 1 FROM "app"."invoice_claim" c WHERE c."instance_id" = b."id"))
	-- Parked: an attempts row waiting or held whose instance did not
	-- run again since (the repair's pick, Decidable).
	- (SELECT count(*) FROM "app"."invoices" AS b JOIN "enginehealth"."attempts" AS a ON a.instance = b."id"::text
		WHERE a.workflow = $2 AND a.task = $3 AND (a.state = 'waiting' OR a.state = 'held') AND NOT EXISTS (SELECT 1 FROM "enginehealth"."events" e WHERE e.kind = 'claim_expired' AND e.workflow = $2 AND e.instance = a.instance AND e.from_state = $1 AND e.at > a.since)
		  AND b."status" = $1 AND NOT EXISTS (SELECT 1 FROM "app"."invoice_claim" c WHERE c."instance_id" = b."id"))
