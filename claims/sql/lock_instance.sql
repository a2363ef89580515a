{{/*
lock_instance: the instance, when it is in the task's begin state, as
text (Table.Claim, first in its transaction): its row is locked until
the claim is in; an instance another claimer holds locked is skipped (no
row: not claimable). Rendered with text/template (claims depends on
nothing of the daemon) once per Table, like every statement of the
protocol.

Parameters (numbered by hand):
  $1  id     the instance's id
  $2  begin  the task's begin state
*/ -}}
SELECT {{.ID}}::text FROM {{.Instances}} WHERE {{.ID}} = $1 AND {{.Status}} = $2 FOR UPDATE SKIP LOCKED
