{{/*
deregister_keep: a clean stop of a node in Unexpected shutdown keeps its
record (only an operator's ack takes it out of that status) and clears
only its master flag (Store.Deregister, after deregister_lock).

Parameters (numbered $1, $2, … in the order they first appear):
  name  the node
*/ -}}
UPDATE {{.Nodes}} SET is_master = false WHERE name = {{arg "name"}}
