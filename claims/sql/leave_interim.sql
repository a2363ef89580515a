{{/*
leave_interim: moves the instance from the task's interim state to an
end or the failed state (Table.Finish) or back to the begin state
(Table.Release), after delete_claim in the same transaction; no row
changed: the instance left the interim state under a live claim.

Parameters (numbered by hand):
  $1  instance  the instance's id
  $2  interim   the task's interim state
  $3  to        the state it goes to
*/ -}}
UPDATE {{.Instances}} SET {{.Status}} = $3 WHERE {{.ID}} = $1 AND {{.Status}} = $2
