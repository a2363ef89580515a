-- promote_recovering
-- $1 actor
-- $2 reason
UPDATE "enginehealth".nodes SET status = 'Ready', status_changed_at = now(),
	status_changed_by = $1, status_reason = $2
WHERE status = 'Recovering' RETURNING name
