{{/*
known: whether a node has a record (Store.ResetGrade of a node without a
grade row).

Parameters (numbered $1, $2, … in the order they first appear):
  name  the node
*/ -}}
SELECT EXISTS (SELECT 1 FROM {{.Nodes}} WHERE name = {{arg "name"}})
