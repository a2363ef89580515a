-- settle_batch: the first batch of a claimable task with an on_failure policy (which decides a failed retry)
-- $1 workflow
-- $2 task
-- $3 batch_size
-- $4 ends
-- $5 begin
-- $6 interim
-- $7 failed
-- $8 run
WITH a AS MATERIALIZED (
	-- Up to batch_size retried rows after the last one, locked (the
	-- partial index of retried rows, in instance order).
	SELECT a.ctid AS tid, a.instance, a.attempt, a.manual FROM "enginehealth"."attempts" AS a
	WHERE a.workflow = $1 AND a.task = $2 AND a.state = 'retried'
	ORDER BY a.instance LIMIT $3 FOR UPDATE SKIP LOCKED
), j AS MATERIALIZED (
	-- Each with its instance's state (NULL: the row is gone), read
	-- through the primary key.
	SELECT a.*, (SELECT t."status"::text FROM "app"."invoices" AS t WHERE t."id" = a.instance::bigint) AS st FROM a
), x AS MATERIALIZED (
	-- The outcome: '' while the retry still runs (begin, interim),
	-- and, under an on_failure policy, when the engine failed it (the
	-- policy decides it).
	SELECT j.*, CASE
			WHEN st IS NULL THEN 'cancelled'
			WHEN st = ANY ($4::text[]) THEN 'succeeded'
			WHEN st = $5 OR st = $6 THEN ''
			WHEN st = $7 THEN ''
			ELSE 'succeeded' END AS next,
		CASE WHEN j.manual > 0 AND j.attempt = 0 THEN 'manual retry ' || j.manual ELSE 'retry ' || j.attempt END AS what
	FROM j
), y AS (
	SELECT x.*, CASE next
			WHEN 'cancelled' THEN what || ' cancelled: the instance no longer exists'
			WHEN 'failed' THEN what || ' failed: the engine moved the instance to ' || st
			WHEN 'succeeded' THEN CASE WHEN st = ANY ($4::text[])
				THEN what || ' succeeded: the instance reached ' || st
				ELSE what || ' succeeded: the instance went on to ' || st END
		END AS reason
	FROM x WHERE x.next <> ''
), upd AS (
	UPDATE "enginehealth"."attempts" AS a SET state = y.next, since = now(), last_reason = y.reason, ended_parked = false
	FROM y WHERE a.ctid = y.tid
	RETURNING y.instance, y.st, y.attempt, y.next, y.reason
), ev AS (
	-- One event per row closed.
	INSERT INTO "enginehealth"."events" (kind, run_id, workflow, instance, task, to_state, attempt, reason)
	SELECT CASE x.next WHEN 'succeeded' THEN 'retry_succeeded' WHEN 'failed' THEN 'retry_failed' ELSE 'retry_cancelled' END,
		$8, $1, x.instance, $2, x.st, x.attempt, x.reason
	FROM upd x
)
-- The rows looked at, the last one (the next batch's start) and the
-- outcomes.
SELECT (SELECT count(*) FROM a), coalesce((SELECT max(instance) FROM a), ''),
	count(*) FILTER (WHERE next = 'succeeded'), count(*) FILTER (WHERE next = 'failed'),
	count(*) FILTER (WHERE next = 'cancelled')
FROM upd
