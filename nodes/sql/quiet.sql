{{/*
quiet: the grade rows of the nodes graded above NORMAL without an
interruption or a grade change for the quiet period, by node, locked
(the grader's calm brings them back to NORMAL).

Parameters (numbered $1, $2, … in the order they first appear):
  quiet_period  failover.quiet_period, in seconds
*/ -}}
SELECT {{.Columns}} FROM {{.Grades}}
WHERE grade <> 'NORMAL' AND greatest(changed_at, last_interruption_at) < now() - make_interval(secs => {{arg "quiet_period"}})
ORDER BY node FOR UPDATE
