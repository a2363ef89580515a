{{/*
ack_lock: reads and locks a node's status before an operator's ack
(Store.Ack): only a node in Unexpected shutdown may be acknowledged.

Parameters (numbered $1, $2, … in the order they first appear):
  name  the node
*/ -}}
SELECT status FROM {{.Nodes}} WHERE name = {{arg "name"}} FOR UPDATE
