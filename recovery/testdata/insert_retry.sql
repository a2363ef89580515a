-- insert_retry
-- $1 workflow
-- $2 instance
-- $3 task
-- $4 attempt
-- $5 cause
-- $6 left_in
-- $7 reason
-- $8 nodes
-- $9 last_node
INSERT INTO "enginehealth".attempts (workflow, instance, task, attempt, manual, state, cause, left_in, last_attempt_at, last_reason, nodes, last_node)
VALUES ($1, $2, $3, $4, 1, 'retried', $5, $6, now(), $7,
	$8, $9)
