{{/*
move_mark: moves a task's failure mark up to a lag before the database
clock, never back, after a pass of its failures (Repairer.Failures,
failures.go): a failure committed up to the lag after its timestamp is
still found by the next pass.

Parameters (numbered $1, $2, … in the order they first appear):
  lag_ms          the lag, in milliseconds
  workflow, task  the task
*/ -}}
UPDATE {{.Marks}} SET mark = greatest(mark, now() - {{arg "lag_ms"}} * interval '1 millisecond')
WHERE workflow = {{arg "workflow"}} AND task = {{arg "task"}}
