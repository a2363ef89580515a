{{/*
latest_expiry_node: an SQL expression, the node of the latest
claim_expired event about an instance of a workflow, or NULL
(Log.LatestExpiryNode, rendered at each call as a fragment of the
caller's statement; Workflow and Instance are the caller's SQL
expressions). The partial index of expired claims serves it.

No parameters of its own: Workflow and Instance may hold the caller's
(numbered by the caller, or sqltext.Arg marks its statement numbers).
*/ -}}
(SELECT e.node FROM {{.Events}} e WHERE e.kind = 'claim_expired' AND e.workflow = {{.Workflow}} AND e.instance = {{.Instance}} ORDER BY e.id DESC LIMIT 1)
