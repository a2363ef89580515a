-- revive
-- $1 actor
-- $2 reason
-- $3 threshold
UPDATE "enginehealth".nodes SET status = 'Ready', status_changed_at = now(),
	status_changed_by = $1, status_reason = $2
WHERE status = 'Not responding' AND last_active >= now() - make_interval(secs => $3)
RETURNING name, 'Not responding' AS from_status, status AS to_status
