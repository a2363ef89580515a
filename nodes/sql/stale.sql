{{/*
stale: the nodes in service (Recovering or Ready) whose last_active is
older than the threshold on the database clock, by name, locked
(Store.Stale, in the master's transaction). Nodes in Unexpected shutdown
are out of service whatever their heartbeats do.

Parameters (numbered $1, $2, … in the order they first appear):
  threshold  the age, in seconds
*/ -}}
SELECT name FROM {{.Nodes}} WHERE status IN ('Recovering', 'Ready')
	AND last_active < now() - make_interval(secs => {{arg "threshold"}}) ORDER BY name FOR UPDATE
