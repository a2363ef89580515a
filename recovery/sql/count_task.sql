{{/*
count_task: how many instances of a task a repair would decide now (a
run's planned count): in its interim state, unclaimed, not parked by a
policy (waiting for a retry, held) unless run again since; of the
instances whose claims the run expired only, when not a sweep. The
repairer renders it (recovery/recovery.go, count); the golden files in
recovery/testdata/count_task/ show it rendered.

Parameters (numbered $1, $2, … in the order they first appear):
  from            the task's interim state
  ids             (IDs) the instances to look at
  workflow, task  the task's workflow and name
*/ -}}
-- In three counts, each cheap where its rows are few (one snapshot: the
-- statement's): the instances in the state, less those claimed (read
-- from the claims), less those parked and not run again since, unclaimed
-- (a join with the parked rows: an instance has at most one attempts row
-- of the task, its primary key). One anti-join of every instance in the
-- state with the claims and the attempts rows took three times as long
-- where nothing is parked; with 100k parked the two take about as long.
SELECT (SELECT count(*) FROM {{.Table}} AS b WHERE b.{{.Status}} = {{arg "from"}}{{template "ids" .}})
	- (SELECT count(*) FROM {{.Table}} AS b WHERE b.{{.Status}} = {{arg "from"}} AND {{.Claimed}}{{template "ids" .}})
	-- Parked: an attempts row waiting or held whose instance did not
	-- run again since (the repair's pick, Decidable).
	- (SELECT count(*) FROM {{.Table}} AS b JOIN {{.Attempts}} AS a ON a.instance = b.{{.ID}}::text
		WHERE a.workflow = {{arg "workflow"}} AND a.task = {{arg "task"}} AND (a.state = 'waiting' OR a.state = 'held') AND NOT {{.Again}}
		  AND b.{{.Status}} = {{arg "from"}} AND {{.Unclaimed}}{{template "ids" .}})
{{- define "ids"}}{{if .IDs}} AND b.{{.ID}} = ANY ({{arg "ids"}}){{end}}{{end}}
