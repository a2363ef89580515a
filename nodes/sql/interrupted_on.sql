{{/*
interrupted_on: the nodes an instance's work (a signature) was
interrupted on within the retention, by name (the grader's
interruption: on two or more, the instance is the problem).

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, instance, task  the signature
  retention                 how far back, in seconds
*/ -}}
SELECT array_agg(DISTINCT node ORDER BY node) FROM {{.Interruptions}}
WHERE workflow = {{arg "workflow"}} AND instance = {{arg "instance"}} AND task = {{arg "task"}}
	AND at > now() - make_interval(secs => {{arg "retention"}})
