{{/*
instance_attempts: an instance's attempts rows, one per task a policy
or an operator acted on, as AttemptViews, by task (Repairer.Instance,
instance.go).

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, instance  the instance
*/ -}}
SELECT task, attempt, manual, state, state = 'waiting' AS in_retry,
	cause, left_in, since, last_attempt_at, next_attempt_at, last_node, nodes, last_reason, last_error
FROM {{.Attempts}} WHERE workflow = {{arg "workflow"}} AND instance = {{arg "instance"}} ORDER BY task
