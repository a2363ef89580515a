{{/*
list_runs: the latest runs, newest first, as RunRows (Repairer.ListRuns);
with Acted, only those that did something or did not finish well:
claims expired, instances planned or done, an error, a run not
finished, or one not periodic (Repairer.ActedRuns; idle passes are left
out). Both shapes are rendered once per repairer (runs.go).

Parameters (numbered $1, $2, … in the order they first appear):
  limit  the runs listed at most
*/ -}}
SELECT {{.Columns}}
FROM {{.Runs}} WHERE {{if .Acted -}}
	(claims_expired > 0 OR planned > 0 OR done > 0 OR error <> '' OR status <> 'finished' OR trigger <> {{.Periodic}})
{{- else}}TRUE{{end}} ORDER BY id DESC LIMIT {{arg "limit"}}
