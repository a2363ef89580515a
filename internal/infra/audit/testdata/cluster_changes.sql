-- cluster_changes
-- $1 since
-- $2 limit
SELECT id, at, kind, actor, term, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason, via
FROM "enginehealth"."event_log"
WHERE at >= $1 AND kind IN ('master_elected', 'master_lost', 'node_registered', 'node_status', 'node_deregistered',
	'node_forgotten', 'node_grade')
ORDER BY id LIMIT $2
