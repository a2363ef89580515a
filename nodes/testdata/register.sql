-- register
-- $1 name
-- $2 incarnation
-- $3 hostname
-- $4 version
-- $5 api_address
-- $6 schema_version
-- $7 recover_after_crash
INSERT INTO "enginehealth".nodes AS n (name, incarnation, hostname, status, version, api_address,
		status_changed_by, status_reason, schema_version)
	VALUES ($1, $2, $3, 'Recovering', $4, $5,
		$1, 'registered', nullif($6::integer, 0))
	ON CONFLICT (name) DO UPDATE SET
		previous_incarnation = n.incarnation,
		incarnation = EXCLUDED.incarnation,
		hostname = EXCLUDED.hostname,
		is_master = false,
		version = EXCLUDED.version,
		schema_version = EXCLUDED.schema_version,
		api_address = EXCLUDED.api_address,
		last_active = now(),
		active_since = now(),
		status = CASE WHEN $7 THEN 'Recovering' ELSE 'Unexpected shutdown' END,
		-- still awaiting an ack: the record keeps why it is there
		status_changed_at = CASE WHEN n.status = 'Unexpected shutdown' AND NOT $7 THEN n.status_changed_at ELSE now() END,
		status_changed_by = CASE WHEN n.status = 'Unexpected shutdown' AND NOT $7 THEN n.status_changed_by ELSE EXCLUDED.name END,
		status_reason = CASE WHEN n.status = 'Unexpected shutdown' AND NOT $7 THEN n.status_reason
			ELSE 'restarted without a clean shutdown (previous incarnation ' || n.incarnation || ', status ' || n.status || ')' END
	RETURNING name, incarnation, previous_incarnation, hostname, status, is_master,
	last_active, active_since, version, api_address,
	coalesce((SELECT g.grade FROM "enginehealth".node_grades g WHERE g.node = n.name), 'NORMAL') AS failover_grade,
	(SELECT CASE WHEN g.rule <> '' THEN g.changed_at END FROM "enginehealth".node_grades g WHERE g.node = n.name) AS grade_changed_at,
	coalesce((SELECT g.workflow || '/' || g.task || '/' || g.instance FROM "enginehealth".node_grades g WHERE g.node = n.name), '') AS grade_signature,
	coalesce((SELECT g.reason FROM "enginehealth".node_grades g WHERE g.node = n.name), '') AS grade_reason,
	status_changed_at, status_changed_by, status_reason,
	extract(epoch FROM now() - last_active)::float8 AS seconds_since_active
