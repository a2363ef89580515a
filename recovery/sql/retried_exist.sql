{{/*
retried_exist: whether a task has retried attempts rows, whose outcome
settle_batch looks for, through their partial index (Repairer.Settle,
settle.go).

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, task  the task
*/ -}}
SELECT EXISTS (SELECT 1 FROM {{.Attempts}}
	WHERE workflow = {{arg "workflow"}} AND task = {{arg "task"}} AND state = 'retried')
