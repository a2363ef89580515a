{{/*
add_planned: adds to a run's planned count the instances a task's
repair will decide (Repairer.addPlanned, runs.go).

Parameters (numbered $1, $2, … in the order they first appear):
  n    the instances planned
  run  the run
*/ -}}
UPDATE {{.Runs}} SET planned = planned + {{arg "n"}} WHERE id = {{arg "run"}}
