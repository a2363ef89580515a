-- instance_attempts
-- $1 workflow
-- $2 instance
SELECT task, attempt, manual, state, state = 'waiting' AS in_retry,
	cause, left_in, since, last_attempt_at, next_attempt_at, last_node, nodes, last_reason, last_error
FROM "enginehealth".attempts WHERE workflow = $1 AND instance = $2 ORDER BY task
