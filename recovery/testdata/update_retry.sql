-- update_retry
-- $1 cause
-- $2 left_in
-- $3 reason
-- $4 workflow
-- $5 instance
-- $6 task
-- $7 attempt
-- $8 manual
-- $9 state
UPDATE "enginehealth".attempts SET manual = manual + 1, state = 'retried', cause = $1,
	left_in = $2, since = now(), last_attempt_at = now(), next_attempt_at = NULL, last_reason = $3
WHERE workflow = $4 AND instance = $5 AND task = $6
	AND attempt = $7 AND manual = $8 AND state = $9
