{{/*
latest_expiry_node: an SQL expression, the node of the latest
claim_expired event about an instance of a workflow written by one of
some runs, or NULL (Log.LatestExpiryNode, rendered at each call as a
fragment of the caller's statement; Workflow, Instance and Runs, an
array of run ids, are the caller's SQL expressions). The partial index
of expired claims serves it.

No parameters of its own: Workflow, Instance and Runs may hold the caller's
(numbered by the caller, or sqltext.Arg marks its statement numbers).
*/ -}}
(SELECT e.node FROM {{.Events}} e WHERE e.kind = 'claim_expired' AND e.workflow = {{.Workflow}} AND e.instance = {{.Instance}} AND e.run_id = ANY ({{.Runs}}) ORDER BY e.id DESC LIMIT 1)
