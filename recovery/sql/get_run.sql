{{/*
get_run: one run, as a RunRow (Repairer.Run, runs.go).

Parameters (numbered $1, $2, … in the order they first appear):
  run  the run
*/ -}}
SELECT {{.Columns}}
FROM {{.Runs}} WHERE id = {{arg "run"}}
