{{/*
lock_attempt: reads and locks an instance's attempts row of a task for
an operator's manual retry, without waiting: a row the check holds
fails at once (lock_not_available) and the operator tries again
(Repairer.Retry, operator.go, after lock_instance). until: seconds to
its retry on the database clock.

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, instance, task  the row's key
*/ -}}
SELECT attempt, manual, state, cause, next_attempt_at,
	extract(epoch FROM next_attempt_at - now())::float8 AS until
FROM {{.Attempts}} WHERE workflow = {{arg "workflow"}} AND instance = {{arg "instance"}} AND task = {{arg "task"}} FOR UPDATE NOWAIT
