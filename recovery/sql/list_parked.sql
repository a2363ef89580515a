{{/*
list_parked: the attempts rows a policy parked, of one workflow or all,
in the order of the state's partial index: held for an operator, oldest
first per workflow (Repairer.Holds), or, with Waiting, waiting for their
retry, soonest due first, with how long until then on the database
clock (Repairer.Waiting). Both shapes are rendered once per repairer
(operator.go, parked).

Parameters (numbered $1, $2, … in the order they first appear):
  workflow  the workflow ('' for all)
  limit     rows listed at most
*/ -}}
SELECT workflow, instance, task, left_in, cause, since, attempt, manual,
	last_node, nodes, last_error, last_reason, next_attempt_at,
	extract(epoch FROM next_attempt_at - now())::float8 AS due_in
FROM {{.Attempts}} WHERE {{if .Waiting}}state = 'waiting'{{else}}state = 'held'{{end}} AND ({{arg "workflow"}} = '' OR workflow = {{arg "workflow"}})
ORDER BY {{if .Waiting}}next_attempt_at, instance{{else}}workflow, since, instance{{end}} LIMIT {{arg "limit"}}
