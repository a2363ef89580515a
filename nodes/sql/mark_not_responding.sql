{{/*
mark_not_responding: moves the named nodes to Not responding if they are
still in service (Recovering or Ready) and stale (re-checked here), and
clears their master flag, in the master's fenced transaction; returns
each change with the status it left (Store.MarkNotResponding, which
writes an event each).

Parameters (numbered $1, $2, … in the order they first appear):
  names      the nodes (text[])
  actor      who changed the status (the master)
  reason     why
  threshold  the age of a stale last_active, in seconds
*/ -}}
WITH old AS (SELECT name, status FROM {{.Nodes}} WHERE name = ANY({{arg "names"}}) FOR UPDATE)
UPDATE {{.Nodes}} AS n SET status = 'Not responding', is_master = false,
	status_changed_at = now(), status_changed_by = {{arg "actor"}}, status_reason = {{arg "reason"}}
FROM old WHERE n.name = old.name AND n.status IN ('Recovering', 'Ready')
	AND n.last_active < now() - make_interval(secs => {{arg "threshold"}})
RETURNING n.name, old.status AS from_status, n.status AS to_status
