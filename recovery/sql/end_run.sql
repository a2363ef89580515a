{{/*
end_run: marks a run finished, or failed with a summary of its error
(Repairer.endRun, runs.go).

Parameters (numbered $1, $2, … in the order they first appear):
  status  finished or failed
  error   the failure's summary ('' when finished)
  run     the run
*/ -}}
UPDATE {{.Runs}} SET status = {{arg "status"}}, error = {{arg "error"}}, finished_at = now() WHERE id = {{arg "run"}}
