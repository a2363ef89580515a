{{/*
interrupted_on: the nodes each of a batch's instances' work (a
signature) was interrupted on within the retention, by name (the
grader's interruptions: on two or more, the instance is the problem).
One row per signature that has any; read once for the batch (grading
writes no interruptions, so what each interruption of the batch would
read, one at a time, is the same).

Parameters (numbered $1, $2, … in the order they first appear):
  workflows, instances, tasks  the signatures (text[] each, one per
                               signature, in step)
  retention                    how far back, in seconds
*/ -}}
SELECT s.workflow, s.instance, s.task, array_agg(DISTINCT i.node ORDER BY i.node) AS nodes
FROM unnest({{arg "workflows"}}::text[], {{arg "instances"}}::text[], {{arg "tasks"}}::text[]) AS s(workflow, instance, task)
JOIN {{.Interruptions}} i ON i.workflow = s.workflow AND i.instance = s.instance AND i.task = s.task
	AND i.at > now() - make_interval(secs => {{arg "retention"}})
GROUP BY 1, 2, 3
