{{/*
deregister_lock: reads and locks this incarnation's status on clean
shutdown (Store.Deregister). No row: the record is gone or another
incarnation's.

Parameters (numbered $1, $2, … in the order they first appear):
  name         the node
  incarnation  this process's incarnation
*/ -}}
SELECT status FROM {{.Nodes}} WHERE name = {{arg "name"}} AND incarnation = {{arg "incarnation"}} FOR UPDATE
