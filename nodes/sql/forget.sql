{{/*
forget: deletes the records of the nodes Not responding for longer than
the age given, in the master's fenced transaction; returns each change
(Store.Forget, which writes an event each).

Parameters (numbered $1, $2, … in the order they first appear):
  after  the age, in seconds
*/ -}}
DELETE FROM {{.Nodes}} WHERE status = 'Not responding'
	AND last_active < now() - make_interval(secs => {{arg "after"}})
RETURNING name, status AS from_status, '' AS to_status
