-- settle_parked: closing the waiting retries found in the first slice
-- $1 workflow
-- $2 task
-- $3 limit
-- $4 ends
-- $5 what
-- $6 run
WITH h AS MATERIALIZED (
	-- The slice, in the order of the state's partial index (the state
	-- a literal, so that the planner reads it).
	SELECT a.ctid AS tid, a.instance, a.attempt, a.left_in, a.next_attempt_at AS at FROM "enginehealth"."attempts" AS a
	WHERE a.workflow = $1 AND a.state = 'waiting' AND a.task = $2
	-- No row locks: most rows looked at stay as they are; the
	-- update takes those it changes, by tuple id and state (a
	-- row changed since is not found).
	ORDER BY a.next_attempt_at, a.instance LIMIT $3
), x AS MATERIALIZED (
	-- Those whose instance is no longer where it was left: a waiting
	-- retry's instance reached an end state or is gone.
	SELECT j.*, j.st = ANY ($4::text[]) AS ended, CASE
			WHEN j.st IS NULL THEN $5 || ': the instance no longer exists'
			WHEN j.st = ANY ($4::text[]) THEN $5 || ': the instance reached end state ' || j.st
			ELSE $5 || ': instance moved to ' || j.st || ' by someone else' END AS reason
	FROM (SELECT h.*, (SELECT t."state"::text FROM "app"."reports" AS t WHERE t."id" = h.instance::bigint) AS st FROM h) AS j
	WHERE j.st IS NULL OR j.st = ANY ($4::text[])
), upd AS (
	-- A row that ended is succeeded (ended_parked: its retry or hold
	-- never ran), any other cancelled.
	UPDATE "enginehealth"."attempts" AS a SET state = CASE WHEN x.ended THEN 'succeeded' ELSE 'cancelled' END, since = now(),
		next_attempt_at = NULL, last_reason = x.reason, ended_parked = coalesce(x.ended, false)
	FROM x WHERE a.ctid = x.tid AND a.state = 'waiting'
	RETURNING x.instance, x.left_in, x.st, x.attempt, x.reason
), ev AS (
	-- One event per row closed.
	INSERT INTO "enginehealth"."events" (kind, run_id, workflow, instance, task, from_state, to_state, attempt, reason)
	SELECT 'retry_cancelled', $6, $1, x.instance, $2, x.left_in, x.st, x.attempt, x.reason
	FROM upd x
)
SELECT count(*) FROM upd
