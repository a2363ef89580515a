{{/*
cancel_stale: cancels waiting retries that the task's policy no longer
allows (it is not retry any more, or its max_attempts is now below the
retry), one event each; the instances stay where they are. The repairer
renders it (recovery/attempts.go, cancelStale); the golden file in
recovery/testdata/cancel_stale/ shows it rendered.

Parameters (numbered $1, $2, … in the order they first appear):
  reason          why (the rows' last reason, the events' reason)
  workflow, task  the task's workflow and name
  instances       the instances whose waiting rows are cancelled
  run             the run the events belong to
*/ -}}
WITH gone AS (
	UPDATE {{.Attempts}} SET state = 'cancelled', next_attempt_at = NULL, since = now(), last_reason = {{arg "reason"}}
	WHERE workflow = {{arg "workflow"}} AND task = {{arg "task"}} AND instance = ANY ({{arg "instances"}}::text[]) AND state = 'waiting'
	RETURNING instance, left_in, attempt
), ev AS (
	-- One event per row cancelled, about the retry it would have made.
	INSERT INTO {{.Events}} (kind, run_id, workflow, instance, task, from_state, attempt, reason)
	SELECT {{.Kind}}, {{arg "run"}}, {{arg "workflow"}}, x.instance, {{arg "task"}}, x.left_in, x.attempt + 1, {{arg "reason"}}
	FROM gone x
)
SELECT count(*) FROM gone
