{{/*
list_parked: the attempts rows a policy parked, of one workflow or all,
in the order of the state's partial index: held for an operator, oldest
first per workflow (Repairer.Holds), or, with Waiting, waiting for their
retry, soonest due first, with how long until then on the database
clock (Repairer.Waiting). With Filtered, the rows of a task, a node
(the last one, or any it was interrupted on), a cause, parked for at
least an age, and how many match in all (the console's lists,
Repairer.Parked). Each shape is rendered once per repairer
(operator.go, parked).

Parameters (numbered $1, $2, … in the order they first appear):
  workflow  the workflow ('' for all)
  task, node, cause
            (Filtered) the task, node and cause ('' for any)
  age_s     (Filtered) seconds parked at least (0 for any)
  limit     rows listed at most
*/ -}}
SELECT workflow, instance, task, left_in, cause, since, attempt, manual,
	last_node, nodes, last_error, last_reason, next_attempt_at,
	extract(epoch FROM next_attempt_at - now())::float8 AS due_in{{if .Filtered}},
	count(*) OVER () AS total{{end}}
FROM {{.Attempts}} WHERE {{if .Waiting}}state = 'waiting'{{else}}state = 'held'{{end}} AND ({{arg "workflow"}} = '' OR workflow = {{arg "workflow"}})
{{- if .Filtered}}
	AND ({{arg "task"}} = '' OR task = {{arg "task"}})
	AND ({{arg "node"}} = '' OR last_node = {{arg "node"}} OR {{arg "node"}} = ANY (nodes))
	AND ({{arg "cause"}} = '' OR cause = {{arg "cause"}})
	AND since <= now() - {{arg "age_s"}}::float8 * interval '1 second'
{{- end}}
ORDER BY {{if .Waiting}}next_attempt_at, instance{{else}}workflow, since, instance{{end}} LIMIT {{arg "limit"}}
