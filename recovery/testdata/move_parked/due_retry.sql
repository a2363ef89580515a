-- move_parked: due retries of a claimable task's interruptions, in a run
-- $1 workflow
-- $2 task
-- $3 instances
-- $4 parked
-- $5 ids
-- $6 to
-- $7 left_in
-- $8 ends
-- $9 begin
-- $10 reason
-- $11 retry_of
-- $12 cancelled
-- $13 done
-- $14 kind
-- $15 cancel_kind
-- $16 actor
-- $17 term
-- $18 run
-- $19 via
WITH due AS MATERIALIZED (
	-- The rows, still parked.
	SELECT a.instance AS id, a.attempt FROM "enginehealth"."attempts" AS a
	WHERE a.workflow = $1 AND a.task = $2 AND a.instance = ANY ($3::text[]) AND a.state = $4
), cur AS MATERIALIZED (
	-- Where their instances are now.
	SELECT t."id"::text AS id, t."status"::text AS st, EXISTS (SELECT 1 FROM "app"."invoice_claim" c WHERE c."instance_id" = t."id") AS claimed FROM "app"."invoices" AS t WHERE t."id" = ANY ($5)
), moved AS (
	-- Those still where they were left, unclaimed, move.
	UPDATE "app"."invoices" AS t SET "status" = $6 WHERE t."id" = ANY ($5) AND t."status" = $7 AND NOT EXISTS (SELECT 1 FROM "app"."invoice_claim" c WHERE c."instance_id" = t."id")
	  AND t."id"::text IN (SELECT id FROM due)
	RETURNING t."id"::text AS id
), res AS MATERIALIZED (
	-- Each row's outcome: moved (ok), ended (its instance reached an
	-- end state), run elsewhere, or cancelled; and its reason.
	SELECT d.id, d.attempt, m.id IS NOT NULL AS ok, m.id IS NULL AND c.st = ANY ($8::text[]) AS ended,
		m.id IS NULL AND c.id IS NOT NULL AND (c.st = $9 OR c.st = $7 AND c.claimed) AS elsewhere,
		CASE WHEN m.id IS NOT NULL THEN format('%s: retry %s of %s', $10::text, d.attempt + 1, $11::int)
		     WHEN c.id IS NULL THEN $12 || ': the instance no longer exists'
		     WHEN c.st = ANY ($8::text[]) THEN format('%s: the instance reached end state %s', $12, c.st)
		     WHEN (c.st = $9 OR c.st = $7 AND c.claimed) AND c.st = $9 THEN format('%s: someone else moved the instance back to %s: retry %s runs there (counted as made)', $12, c.st, d.attempt + 1)
		     WHEN (c.st = $9 OR c.st = $7 AND c.claimed) THEN format('%s: the instance was claimed by someone else: retry %s runs there (counted as made)', $12, d.attempt + 1)
		     WHEN c.st <> $7 THEN format('%s: instance moved to %s by someone else', $12, c.st)
		     ELSE $12 || ': the instance was claimed by someone else' END AS reason
	FROM due d LEFT JOIN moved m USING (id) LEFT JOIN cur c USING (id)
), att AS (
	-- The rows, under the attempt-number guard (see policy_batch.sql):
	-- a row changes only in the state and with the count read. A row
	-- whose instance ended is succeeded (a later case of the task counts
	-- from 0; ended_parked: statistics count it cancelled).
	UPDATE "enginehealth"."attempts" AS a SET state = CASE WHEN x.ok THEN $13 WHEN x.ended THEN 'succeeded' WHEN x.elsewhere THEN 'retried' ELSE 'cancelled' END,
		attempt = CASE WHEN x.ok THEN x.attempt + 1 WHEN x.elsewhere THEN a.attempt + 1 ELSE a.attempt END,
		manual = CASE WHEN x.ok THEN a.manual ELSE a.manual END,
		last_attempt_at = CASE WHEN x.ok AND $6 = $9 THEN now() ELSE a.last_attempt_at END,
		next_attempt_at = NULL, since = now(), last_reason = x.reason, ended_parked = coalesce(x.ended, false)
	FROM res x
	WHERE a.workflow = $1 AND a.task = $2 AND a.instance = x.id AND a.state = $4 AND a.attempt = x.attempt
	RETURNING 1
), ev AS (
	-- One event per row.
	INSERT INTO "enginehealth"."events" (kind, actor, term, run_id, workflow, instance, task, from_state, to_state, attempt, reason, via)
	SELECT CASE WHEN x.ok THEN $14 ELSE $15 END, nullif($16::text, ''), nullif($17::bigint, 0),
		nullif($18::bigint, 0), $1, x.id, $2, $7, CASE WHEN x.ok THEN $6 END,
		CASE WHEN x.ok THEN x.attempt + 1 WHEN x.elsewhere THEN x.attempt + 1 ELSE x.attempt END, x.reason, nullif($19::text, '')
	FROM res x
), counted AS (
	-- Planned: every row decided here (the run's count left parked
	-- rows out); done: those moved.
	UPDATE "enginehealth"."runs" SET planned = planned + (SELECT count(*) FROM res), done = done + (SELECT count(*) FROM moved) WHERE id = $18
)
-- The moves; the cancelled instances and their reasons; the rows written
-- (the guard: all of them).
SELECT count(*) FILTER (WHERE ok), coalesce(array_agg(id ORDER BY id) FILTER (WHERE NOT ok), '{}'),
	coalesce(array_agg(reason ORDER BY id) FILTER (WHERE NOT ok), '{}'), (SELECT count(*) FROM att) FROM res
