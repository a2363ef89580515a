-- list_filtered
-- $1 after_id
-- $2 node
-- $3 workflow
-- $4 instance
-- $5 kind
-- $6 run_id
-- $7 since
-- $8 until
-- $9 limit
-- $10 max_bytes
SELECT id, at, kind, actor, term, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason, via
FROM (SELECT e.*,
		row_number() OVER w AS n,
		sum(octet_length(kind) + octet_length(actor) + octet_length(reason) + coalesce(octet_length(node), 0)
			+ coalesce(octet_length(workflow), 0) + coalesce(octet_length(instance), 0) + coalesce(octet_length(task), 0)
			+ coalesce(octet_length(from_state), 0) + coalesce(octet_length(to_state), 0) + coalesce(octet_length(via), 0)) OVER w AS text_bytes
	FROM "enginehealth"."event_log" e
	WHERE id > $1 AND node = $2 AND workflow = $3 AND instance = $4 AND kind = $5 AND run_id = $6 AND at >= $7 AND at < $8
	WINDOW w AS (ORDER BY id)
	ORDER BY id LIMIT $9) page
WHERE n = 1 OR text_bytes <= $10
ORDER BY id
