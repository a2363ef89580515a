{{/*
active_ready: the names of the nodes that are Ready and whose last_active
is within the given age on the database clock, by name
(Store.ActiveReady): nodes whose engines may be running.

Parameters (numbered $1, $2, … in the order they first appear):
  within  the age, in seconds
*/ -}}
SELECT name FROM {{.Nodes}} WHERE status = 'Ready'
	AND last_active > now() - make_interval(secs => {{arg "within"}}) ORDER BY name
