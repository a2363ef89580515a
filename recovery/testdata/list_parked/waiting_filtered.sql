-- list_parked: the retries waiting a console list filters, and their count
-- $1 workflow
-- $2 task
-- $3 node
-- $4 cause
-- $5 age_s
-- $6 limit
SELECT workflow, instance, task, left_in, cause, since, attempt, manual,
	last_node, nodes, last_error, last_reason, next_attempt_at,
	extract(epoch FROM next_attempt_at - now())::float8 AS due_in,
	count(*) OVER () AS total
FROM "enginehealth".attempts WHERE state = 'waiting' AND ($1 = '' OR workflow = $1)
	AND ($2 = '' OR task = $2)
	AND ($3 = '' OR last_node = $3 OR $3 = ANY (nodes))
	AND ($4 = '' OR cause = $4)
	AND since <= now() - $5::float8 * interval '1 second'
ORDER BY next_attempt_at, instance LIMIT $6
