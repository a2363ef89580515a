{{/*
plan_task: a dry run's plan of a task: the instances a recovery run
would decide now (in the interim state, unclaimed once expired claims are
deleted, not parked unless run again since) grouped by what their
history makes of them: the retries counted, and the non-retryable
pattern the error matches (1-based; 0: none). Changes nothing. The dry
run renders it (recovery/plan.go, planTask); the golden files in
recovery/testdata/plan_task/ show it rendered. Each: one row per
instance instead, its id as text with its retries counted and its match
(planEach: the plan instance by instance, which the tests compare with
the run that follows).

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, task  the task's workflow and name
  from            the task's interim state
  patterns        the non-retryable patterns, as PostgreSQL regexps (with
                  an error column and patterns only)
*/ -}}
SELECT {{if .Each}}x.id, {{end}}x.prev, x.match, {{if .Each}}1{{else}}count(*){{end}} AS n FROM (
	SELECT {{if .Each}}{{.Instance}} AS id, {{end}}coalesce({{.RetriesCounted}}, 0) AS prev,
		{{if .Patterns}}coalesce((SELECT u.i FROM unnest({{arg "patterns"}}::text[]) WITH ORDINALITY AS u(p, i)
			WHERE b.{{.ErrorColumn}}::text ~ u.p ORDER BY u.i LIMIT 1), 0){{else}}0{{end}} AS match
	FROM {{.Table}} AS b {{.HistoryJoin}}
	WHERE b.{{.Status}} = {{arg "from"}} AND {{.UnclaimedAfterExpiry}} AND {{.Decidable}}
) AS x {{if .Each}}ORDER BY x.id{{else}}GROUP BY 1, 2 ORDER BY 1, 2{{end}}
