{{/*
count_task: how many instances of a task a repair would decide now (a
run's planned count): in its interim state, unclaimed, not parked by a
policy (waiting for a retry, held) unless run again since; of the
instances whose claims the run expired only, when not a sweep. The
repairer renders it (recovery/recovery.go, count); the golden files in
recovery/testdata/count_task/ show it rendered.

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, task  the task's workflow and name
  from            the task's interim state
  ids             (IDs) the instances to look at
*/ -}}
SELECT count(*) FROM {{.Table}} AS b {{.HistoryJoin}}
WHERE b.{{.Status}} = {{arg "from"}} AND {{.Unclaimed}}{{if .IDs}} AND b.{{.ID}} = ANY ({{arg "ids"}}){{end}} AND {{.Decidable}}
