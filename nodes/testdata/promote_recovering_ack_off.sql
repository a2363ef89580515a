-- promote_recovering_ack_off
-- $1 actor
-- $2 reason
UPDATE "enginehealth".nodes SET status = 'Ready', status_changed_at = now(),
	status_changed_by = $1, status_reason = $2
WHERE status IN ('Recovering', 'Unexpected shutdown') RETURNING name
