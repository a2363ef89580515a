{{/*
previous_term: the term recorded before the office's, locked first, so
no other taker can change it any more (Fence.TakeOffice's raise, before
raise_term; 0 when this schema never had a master: the office acts at
once).

No parameters.
*/ -}}
SELECT term FROM {{.Terms}} FOR UPDATE
