-- forget
-- $1 after
DELETE FROM "enginehealth".nodes WHERE status = 'Not responding'
	AND last_active < now() - make_interval(secs => $1)
RETURNING name, status AS from_status, '' AS to_status
