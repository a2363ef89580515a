{{/*
count_nodes: the number of nodes not in Unexpected shutdown, Not
responding ones included (Store.Stale, after stale: the disruption
guard's denominator).

No parameters.
*/ -}}
SELECT count(*) FROM {{.Nodes}} WHERE status <> 'Unexpected shutdown'
