-- count_task: a sweep's count of a claimable task's interrupted instances
-- $1 from
-- $2 workflow
-- $3 task
SELECT count(*) FROM "app"."invoices" AS b
WHERE b."status" = $1 AND NOT EXISTS (SELECT 1 FROM "app"."invoice_claim" c WHERE c."instance_id" = b."id")
	-- Not parked: no attempts row waiting or held whose instance did
	-- not run again since (the repair's pick, Decidable, as an
	-- anti-join: a probe of the primary key per instance, or one read
	-- of the parked rows through their partial indexes, as the planner
	-- finds cheaper).
	AND NOT EXISTS (SELECT 1 FROM "enginehealth"."attempts" AS a
		WHERE a.workflow = $2 AND a.instance = b."id"::text AND a.task = $3
		  AND (a.state = 'waiting' OR a.state = 'held') AND NOT EXISTS (SELECT 1 FROM "enginehealth"."events" e WHERE e.kind = 'claim_expired' AND e.workflow = $2 AND e.instance = a.instance AND e.from_state = $1 AND e.at > a.since))
