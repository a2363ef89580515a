{{/*
ack: an operator's acknowledgement of an unexpected shutdown (Store.Ack,
after ack_lock, which writes the event): the node goes to Recovering.
Returns the record as a Node.

Parameters (numbered $1, $2, … in the order they first appear):
  name    the node
  actor   the operator
  reason  why
*/ -}}
UPDATE {{.Nodes}} AS n SET status = 'Recovering', status_changed_at = now(),
	status_changed_by = {{arg "actor"}}, status_reason = {{arg "reason"}}
WHERE name = {{arg "name"}} RETURNING {{.Columns}}
