{{/*
instance_cases: an instance's retries at once in the tasks where it has
no attempts row (their events hold the attempts: policy_batch; a case
that ends gets its row, so these are one open case per task), oldest
first; eventCases folds them into one AttemptView per task
(Repairer.Instance, instance.go). One probe of the events' hash index on
instance.

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, instance  the instance
*/ -}}
SELECT e.task, e.attempt, e.node, e.at, e.reason, coalesce(e.from_state, '') AS from_state FROM {{.Events}} AS e
WHERE e.instance = {{arg "instance"}} AND e.workflow = {{arg "workflow"}} AND e.task IS NOT NULL
  AND e.kind = {{.KindRepair}} AND e.attempt IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM {{.Attempts}} AS a WHERE a.workflow = e.workflow AND a.instance = e.instance AND a.task = e.task)
ORDER BY e.id
