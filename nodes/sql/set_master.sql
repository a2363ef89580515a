{{/*
set_master: makes this incarnation of a node the only one with the
master flag, in the fenced transaction that takes office
(Store.SetMaster): clears every other flag and sets its own.

Parameters (numbered $1, $2, … in the order they first appear):
  name         the node
  incarnation  its incarnation
*/ -}}
UPDATE {{.Nodes}} SET is_master = (name = {{arg "name"}} AND incarnation = {{arg "incarnation"}})
WHERE is_master OR (name = {{arg "name"}} AND incarnation = {{arg "incarnation"}})
