-- cancel_stale: waiting retries the task's policy no longer allows
-- $1 reason
-- $2 workflow
-- $3 task
-- $4 instances
-- $5 run
WITH gone AS (
	UPDATE "enginehealth"."attempts" SET state = 'cancelled', next_attempt_at = NULL, since = now(), last_reason = $1
	WHERE workflow = $2 AND task = $3 AND instance = ANY ($4::text[]) AND state = 'waiting'
	RETURNING instance, left_in, attempt
), ev AS (
	-- One event per row cancelled, about the retry it would have made.
	INSERT INTO "enginehealth"."events" (kind, run_id, workflow, instance, task, from_state, attempt, reason)
	SELECT 'retry_cancelled', $5, $2, x.instance, $3, x.left_in, x.attempt + 1, $1
	FROM gone x
)
SELECT count(*) FROM gone
