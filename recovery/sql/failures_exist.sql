{{/*
failures_exist: whether any instance is in a task's failed state with
its updated_column at or after the task's failure mark, through the
engine's index on (status_column, updated_column) (Repairer.Failures,
failures.go): a pass that finds none writes nothing.

Parameters (numbered $1, $2, … in the order they first appear):
  failed  the task's failed state
  mark    the task's failure mark, as PostgreSQL prints it
*/ -}}
SELECT EXISTS (SELECT 1 FROM {{.Table}} WHERE {{.Status}} = {{arg "failed"}} AND {{.Updated}} >= {{arg "mark"}}::timestamptz)
