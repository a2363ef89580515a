{{/*
expired_since: an SQL condition, true when a claim on an instance of a
workflow expired after a time while the instance was in a state: a
claim_expired event says so (Log.ExpiredSince, rendered at each call as
a fragment of the caller's statement; Workflow, Instance, State and Since
are the caller's SQL expressions). The partial index of expired claims
finds it.

No parameters of its own: the slots may hold the caller's (numbered by
the caller, or sqltext.Arg marks its statement numbers).
*/ -}}
EXISTS (SELECT 1 FROM {{.Events}} e WHERE e.kind = 'claim_expired' AND e.workflow = {{.Workflow}} AND e.instance = {{.Instance}} AND e.from_state = {{.State}} AND e.at > {{.Since}})
