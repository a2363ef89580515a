{{/*
check_term: the recorded term, held FOR SHARE until the fenced
transaction ends (no newer master takes office meanwhile: raise_term
waits for it), with the server's system identifier, which the fence
compares with the cluster it learnt (a pooler may have moved to another
PostgreSQL cluster) (Fence.InTx, first).

No parameters.
*/ -}}
SELECT term, (SELECT system_identifier FROM pg_control_system()) AS cluster FROM {{.Terms}} FOR SHARE
