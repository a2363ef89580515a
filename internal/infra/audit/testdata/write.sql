-- write
-- $1 kind
-- $2 actor
-- $3 term
-- $4 run_id
-- $5 node
-- $6 workflow
-- $7 instance
-- $8 task
-- $9 from_state
-- $10 to_state
-- $11 attempt
-- $12 reason
-- $13 via
INSERT INTO "enginehealth"."events" (kind, actor, term, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason, via)
	VALUES ($1, nullif($2, ''), $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, nullif($13, ''))
