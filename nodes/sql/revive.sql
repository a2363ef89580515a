{{/*
revive: moves the Not responding nodes whose heartbeat is fresh again
(within the threshold, database clock) back to Ready, in the master's
fenced transaction; returns each change (Store.Revive, which writes an
event each).

Parameters (numbered $1, $2, … in the order they first appear):
  actor      who changed the status (the master)
  reason     why
  threshold  the age of a fresh last_active, in seconds
*/ -}}
UPDATE {{.Nodes}} SET status = 'Ready', status_changed_at = now(),
	status_changed_by = {{arg "actor"}}, status_reason = {{arg "reason"}}
WHERE status = 'Not responding' AND last_active >= now() - make_interval(secs => {{arg "threshold"}})
RETURNING name, 'Not responding' AS from_status, status AS to_status
