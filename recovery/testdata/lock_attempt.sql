-- lock_attempt
-- $1 workflow
-- $2 instance
-- $3 task
SELECT attempt, manual, state, cause, next_attempt_at,
	extract(epoch FROM next_attempt_at - now())::float8 AS until
FROM "enginehealth".attempts WHERE workflow = $1 AND instance = $2 AND task = $3 FOR UPDATE NOWAIT
