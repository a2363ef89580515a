-- list_parked: the open holds
-- $1 workflow
-- $2 limit
SELECT workflow, instance, task, left_in, cause, since, attempt, manual,
	last_node, nodes, last_error, last_reason, next_attempt_at,
	extract(epoch FROM next_attempt_at - now())::float8 AS due_in
FROM "enginehealth".attempts WHERE state = 'held' AND ($1 = '' OR workflow = $1)
ORDER BY workflow, since, instance LIMIT $2
