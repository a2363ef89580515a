-- restore
-- $1 name
-- $2 incarnation
-- $3 hostname
-- $4 status
-- $5 version
-- $6 api_address
-- $7 reason
-- $8 schema_version
-- $9 previous
INSERT INTO "enginehealth".nodes AS n (name, incarnation, hostname, status, version, api_address,
		status_changed_by, status_reason, schema_version, previous_incarnation)
	VALUES ($1, $2, $3, $4, $5, $6,
		$1, $7, nullif($8::integer, 0), $9)
	ON CONFLICT (name) DO UPDATE SET
		previous_incarnation = EXCLUDED.previous_incarnation,
		incarnation = EXCLUDED.incarnation,
		hostname = EXCLUDED.hostname,
		is_master = false,
		version = EXCLUDED.version,
		schema_version = EXCLUDED.schema_version,
		api_address = EXCLUDED.api_address,
		last_active = now(),
		active_since = now(),
		status = EXCLUDED.status,
		status_changed_at = now(),
		status_changed_by = EXCLUDED.status_changed_by,
		status_reason = EXCLUDED.status_reason
	RETURNING name, incarnation, previous_incarnation, hostname, status, is_master,
	last_active, active_since, version, api_address,
	coalesce((SELECT g.grade FROM "enginehealth".node_grades g WHERE g.node = n.name), 'NORMAL') AS failover_grade,
	(SELECT CASE WHEN g.rule <> '' THEN g.changed_at END FROM "enginehealth".node_grades g WHERE g.node = n.name) AS grade_changed_at,
	coalesce((SELECT g.workflow || '/' || g.task || '/' || g.instance FROM "enginehealth".node_grades g WHERE g.node = n.name), '') AS grade_signature,
	coalesce((SELECT g.reason FROM "enginehealth".node_grades g WHERE g.node = n.name), '') AS grade_reason,
	status_changed_at, status_changed_by, status_reason,
	extract(epoch FROM now() - last_active)::float8 AS seconds_since_active
