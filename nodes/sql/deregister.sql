{{/*
deregister: deletes a node's record on clean shutdown (Store.Deregister,
after deregister_lock, which writes the event).

Parameters (numbered $1, $2, … in the order they first appear):
  name  the node
*/ -}}
DELETE FROM {{.Nodes}} WHERE name = {{arg "name"}}
