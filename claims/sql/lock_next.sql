{{/*
lock_next: the instance in the task's begin state with the lowest id,
as text (Table.ClaimNext, first in its transaction: oldest first,
through the index on (status, id)): its row is locked until the claim is
in; rows other claimers hold locked are skipped (no row: nothing to
claim).

Parameters (numbered by hand):
  $1  begin  the task's begin state
*/ -}}
SELECT i.{{.ID}}::text FROM {{.Instances}} AS i WHERE i.{{.Status}} = $1 ORDER BY i.{{.ID}} LIMIT 1 FOR UPDATE SKIP LOCKED
