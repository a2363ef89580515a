{{/*
lock_holds: locks a batch of open holds for an operator's decision,
skipping rows another request holds (Repairer.DecideHolds, operator.go,
in its fenced transaction): with All, every hold (of one workflow or
all), oldest first per workflow; else the named instances'. Both shapes
are rendered once per repairer.

Parameters (numbered $1, $2, … in the order they first appear):
  workflow              (All) the workflow ('' for all)
  limit                 (All) rows per batch
  workflows, instances  (named) the instances, as two arrays of one length
*/ -}}
SELECT workflow, instance, task, left_in FROM {{.Attempts}}
{{if .All -}}
WHERE state = 'held' AND ({{arg "workflow"}} = '' OR workflow = {{arg "workflow"}})
ORDER BY workflow, since LIMIT {{arg "limit"}} FOR UPDATE SKIP LOCKED
{{- else -}}
WHERE state = 'held' AND (workflow, instance) IN (SELECT * FROM unnest({{arg "workflows"}}::text[], {{arg "instances"}}::text[]))
ORDER BY workflow, instance FOR UPDATE SKIP LOCKED
{{- end}}
