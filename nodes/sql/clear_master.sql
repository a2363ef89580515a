{{/*
clear_master: clears the master flag of this incarnation of a node, if
set (Store.ClearMaster, in leader.Fence.StepDown; one row affected: it
was set).

Parameters (numbered $1, $2, … in the order they first appear):
  name         the node
  incarnation  its incarnation
*/ -}}
UPDATE {{.Nodes}} SET is_master = false WHERE name = {{arg "name"}} AND incarnation = {{arg "incarnation"}} AND is_master
