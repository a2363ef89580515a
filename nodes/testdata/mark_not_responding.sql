-- mark_not_responding
-- $1 names
-- $2 actor
-- $3 reason
-- $4 threshold
WITH old AS (SELECT name, status FROM "enginehealth".nodes WHERE name = ANY($1) FOR UPDATE)
UPDATE "enginehealth".nodes AS n SET status = 'Not responding', is_master = false,
	status_changed_at = now(), status_changed_by = $2, status_reason = $3
FROM old WHERE n.name = old.name AND n.status IN ('Recovering', 'Ready')
	AND n.last_active < now() - make_interval(secs => $4)
RETURNING n.name, old.status AS from_status, n.status AS to_status
