{{/*
lock_instance: reads and locks an instance row for an operator's manual
retry: its id as the database prints it, its state, and the node whose
claim holds it (Holder: NULL for a workflow without claims)
(Repairer.Retry, operator.go, first in its fenced transaction).

Parameters (numbered $1, $2, … in the order they first appear):
  instance  the instance's id, as given
*/ -}}
SELECT t.{{.ID}}::text AS id, t.{{.Status}}::text AS state, {{.Holder}} AS holder FROM {{.Table}} AS t
WHERE t.{{.ID}} = {{arg "instance"}} FOR UPDATE
