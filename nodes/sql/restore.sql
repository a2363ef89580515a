{{/*
restore: writes this incarnation's record again when the database lost
it (Store.Restore, which decided the record is gone or an earlier run's,
and locked it): the record takes the registration's columns, the status
given and why. Returns the record as a Node.

Parameters (numbered $1, $2, … in the order they first appear):
  name                  the node (also who changed the status)
  incarnation           this process's incarnation
  hostname              its host
  status                the status it takes
  version, api_address  its version and API address
  reason                why (the status reason)
  schema_version        the newest migration it knows, 0 for none (NULL)
  previous              the previous incarnation it keeps (NULL for none)
*/ -}}
INSERT INTO {{.Nodes}} AS n (name, incarnation, hostname, status, version, api_address,
		status_changed_by, status_reason, schema_version, previous_incarnation)
	VALUES ({{arg "name"}}, {{arg "incarnation"}}, {{arg "hostname"}}, {{arg "status"}}, {{arg "version"}}, {{arg "api_address"}},
		{{arg "name"}}, {{arg "reason"}}, nullif({{arg "schema_version"}}::integer, 0), {{arg "previous"}})
	ON CONFLICT (name) DO UPDATE SET
		previous_incarnation = EXCLUDED.previous_incarnation,
		{{.TakeOver}},
		status = EXCLUDED.status,
		status_changed_at = now(),
		status_changed_by = EXCLUDED.status_changed_by,
		status_reason = EXCLUDED.status_reason
	RETURNING {{.Columns}}
