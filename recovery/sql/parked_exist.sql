{{/*
parked_exist: whether a task has attempts rows in a parked state (held;
waiting), which settle_parked looks at (Repairer.settleParked,
settle.go). The state is a literal (State), so that the planner reads
the state's partial index (a parameter would not match its predicate):
a shape per state, rendered once per repairer.

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, task  the task
*/ -}}
SELECT EXISTS (SELECT 1 FROM {{.Attempts}}
	WHERE workflow = {{arg "workflow"}} AND state = {{.State}} AND task = {{arg "task"}})
