{{/*
register: writes a node's record at start (Store.Register). A new record
starts in Recovering. A record with the name already there was left by a
run that did not shut down cleanly: it takes the new incarnation, keeps
the old one in previous_incarnation, and goes to Unexpected shutdown
(or, with recover_after_crash, to Recovering); one still in Unexpected
shutdown keeps why it is there (the crash it awaits an ack for). Returns
the record as a Node.

Parameters (numbered $1, $2, … in the order they first appear):
  name                 the node (also who changed the status)
  incarnation          this process's incarnation
  hostname, version    this process's host and version
  api_address          its API address
  schema_version       the newest migration it knows, 0 for none (NULL)
  recover_after_crash  a record left by a crash goes to Recovering
*/ -}}
INSERT INTO {{.Nodes}} AS n (name, incarnation, hostname, status, version, api_address,
		status_changed_by, status_reason, schema_version)
	VALUES ({{arg "name"}}, {{arg "incarnation"}}, {{arg "hostname"}}, 'Recovering', {{arg "version"}}, {{arg "api_address"}},
		{{arg "name"}}, 'registered', nullif({{arg "schema_version"}}::integer, 0))
	ON CONFLICT (name) DO UPDATE SET
		previous_incarnation = n.incarnation,
		{{.TakeOver}},
		status = CASE WHEN {{arg "recover_after_crash"}} THEN 'Recovering' ELSE 'Unexpected shutdown' END,
		-- still awaiting an ack: the record keeps why it is there
		status_changed_at = CASE WHEN n.status = 'Unexpected shutdown' AND NOT {{arg "recover_after_crash"}} THEN n.status_changed_at ELSE now() END,
		status_changed_by = CASE WHEN n.status = 'Unexpected shutdown' AND NOT {{arg "recover_after_crash"}} THEN n.status_changed_by ELSE EXCLUDED.name END,
		status_reason = CASE WHEN n.status = 'Unexpected shutdown' AND NOT {{arg "recover_after_crash"}} THEN n.status_reason
			ELSE 'restarted without a clean shutdown (previous incarnation ' || n.incarnation || ', status ' || n.status || ')' END
	RETURNING {{.Columns}}
