{{/*
promote_recovering: moves every node in Recovering to Ready, in the
master's fenced transaction, and returns their names
(Store.PromoteRecovering, which writes an event each). AckOff: a
faultinject build with the ack turned off (EH_UNSAFE=ack) promotes nodes
in Unexpected shutdown too.

Parameters (numbered $1, $2, … in the order they first appear):
  actor   who changed the status (the master)
  reason  why
*/ -}}
UPDATE {{.Nodes}} SET status = 'Ready', status_changed_at = now(),
	status_changed_by = {{arg "actor"}}, status_reason = {{arg "reason"}}
WHERE {{if .AckOff}}status IN ('Recovering', 'Unexpected shutdown'){{else}}status = 'Recovering'{{end}} RETURNING name
