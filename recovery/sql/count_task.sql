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
SELECT count(*) FROM {{.Table}} AS b
WHERE b.{{.Status}} = {{arg "from"}} AND {{.Unclaimed}}{{if .IDs}} AND b.{{.ID}} = ANY ({{arg "ids"}}){{end}}
	-- Not parked: no attempts row waiting or held whose instance did
	-- not run again since (the repair's pick, Decidable, as an
	-- anti-join: a probe of the primary key per instance, or one read
	-- of the parked rows through their partial indexes, as the planner
	-- finds cheaper).
	AND NOT EXISTS (SELECT 1 FROM {{.Attempts}} AS a
		WHERE a.workflow = {{arg "workflow"}} AND a.instance = b.{{.ID}}::text AND a.task = {{arg "task"}}
		  AND (a.state = 'waiting' OR a.state = 'held') AND NOT {{.Again}})
