{{/*
enter_interim: moves the claimed instance to the task's interim state
(Table.Claim and ClaimNext, after insert_claim, in the same transaction:
its row is locked in the begin state).

Parameters (numbered by hand):
  $1  instance  the instance's id
  $2  interim   the task's interim state
*/ -}}
UPDATE {{.Instances}} SET {{.Status}} = $2 WHERE {{.ID}} = $1
