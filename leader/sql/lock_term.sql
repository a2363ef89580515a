{{/*
lock_term: the recorded term, locked (Fence.TakeOffice, when raise_term
changed nothing: the office may take it only if the term is its own
already, a retry of the same office).

No parameters.
*/ -}}
SELECT term, node, incarnation, since FROM {{.Terms}} FOR UPDATE
