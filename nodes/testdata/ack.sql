-- ack
-- $1 actor
-- $2 reason
-- $3 name
UPDATE "enginehealth".nodes AS n SET status = 'Recovering', status_changed_at = now(),
	status_changed_by = $1, status_reason = $2
WHERE name = $3 RETURNING name, incarnation, previous_incarnation, hostname, status, is_master,
	last_active, active_since, version, api_address,
	coalesce((SELECT g.grade FROM "enginehealth".node_grades g WHERE g.node = n.name), 'NORMAL') AS failover_grade,
	(SELECT CASE WHEN g.rule <> '' THEN g.changed_at END FROM "enginehealth".node_grades g WHERE g.node = n.name) AS grade_changed_at,
	coalesce((SELECT g.workflow || '/' || g.task || '/' || g.instance FROM "enginehealth".node_grades g WHERE g.node = n.name), '') AS grade_signature,
	coalesce((SELECT g.reason FROM "enginehealth".node_grades g WHERE g.node = n.name), '') AS grade_reason,
	status_changed_at, status_changed_by, status_reason,
	extract(epoch FROM now() - last_active)::float8 AS seconds_since_active
