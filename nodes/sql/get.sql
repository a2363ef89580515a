{{/*
get: one node's record as a Node (Store.Get; Store.Restore when the
record is this incarnation's already).

Parameters (numbered $1, $2, … in the order they first appear):
  name  the node
*/ -}}
SELECT {{.Columns}}
FROM {{.Nodes}} AS n WHERE name = {{arg "name"}}
