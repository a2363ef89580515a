{{/*
lock_record: reads and locks a node's record, what a registration needs
to know of the record it replaces (Store.Register, Store.Restore).

Parameters (numbered $1, $2, … in the order they first appear):
  name  the node
*/ -}}
SELECT status, incarnation, hostname, active_since FROM {{.Nodes}} WHERE name = {{arg "name"}} FOR UPDATE
