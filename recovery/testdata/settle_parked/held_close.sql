-- settle_parked: closing the holds found after the slice before
-- $1 workflow
-- $2 task
-- $3 cursor_at
-- $4 cursor_instance
-- $5 limit
-- $6 ends
-- $7 what
-- $8 run
WITH h AS MATERIALIZED (
	-- The slice, in the order of the state's partial index (the state
	-- a literal, so that the planner reads it).
	SELECT a.ctid AS tid, a.instance, a.attempt, a.left_in, a.since AS at FROM "enginehealth"."attempts" AS a
	WHERE a.workflow = $1 AND a.state = 'held' AND a.task = $2 AND (a.since, a.instance) > ($3::timestamptz, $4::text)
	-- No row locks: most rows looked at stay as they are; the
	-- update takes those it changes, by tuple id and state (a
	-- row changed since is not found).
	ORDER BY a.since, a.instance LIMIT $5
), x AS MATERIALIZED (
	-- Those whose instance is no longer where it was left: a hold's
	-- instance moved anywhere or is gone.
	SELECT j.*, j.st = ANY ($6::text[]) AS ended, CASE
			WHEN j.st IS NULL THEN $7 || ': the instance no longer exists'
			WHEN j.st = ANY ($6::text[]) THEN $7 || ': the instance reached end state ' || j.st
			ELSE $7 || ': instance moved to ' || j.st || ' by someone else' END AS reason
	FROM (SELECT h.*, (SELECT t."status"::text FROM "app"."invoices" AS t WHERE t."id" = h.instance::bigint) AS st FROM h) AS j
	WHERE j.st IS DISTINCT FROM j.left_in
), upd AS (
	-- A row that ended is succeeded (ended_parked: its retry or hold
	-- never ran), any other cancelled.
	UPDATE "enginehealth"."attempts" AS a SET state = CASE WHEN x.ended THEN 'succeeded' ELSE 'cancelled' END, since = now(),
		next_attempt_at = NULL, last_reason = x.reason, ended_parked = coalesce(x.ended, false)
	FROM x WHERE a.ctid = x.tid AND a.state = 'held'
	RETURNING x.instance, x.left_in, x.st, x.attempt, x.reason
), ev AS (
	-- One event per row closed.
	INSERT INTO "enginehealth"."events" (kind, run_id, workflow, instance, task, from_state, to_state, attempt, reason)
	SELECT 'hold_cancelled', $8, $1, x.instance, $2, x.left_in, x.st, x.attempt, x.reason
	FROM upd x
)
SELECT count(*) FROM upd
