-- list_filtered
-- $1 after_id
-- $2 limit
-- $3 max_bytes
-- $4 node
-- $5 workflow
-- $6 instance
-- $7 kind
-- $8 run_id
-- $9 since
-- $10 until
SELECT id, at, kind, actor, term, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason, via
FROM (SELECT e.*,
		row_number() OVER w AS n,
		sum(octet_length(kind) + octet_length(actor) + octet_length(reason) + coalesce(octet_length(node), 0)
			+ coalesce(octet_length(workflow), 0) + coalesce(octet_length(instance), 0) + coalesce(octet_length(task), 0)
			+ coalesce(octet_length(from_state), 0) + coalesce(octet_length(to_state), 0) + coalesce(octet_length(via), 0)) OVER w AS text_bytes
	FROM "enginehealth".event_log e
	WHERE id > $1 AND node = $4 AND workflow = $5 AND instance = $6 AND kind = $7 AND run_id = $8 AND at >= $9 AND at < $10
	WINDOW w AS (ORDER BY id)
	ORDER BY id LIMIT $2) page
WHERE n = 1 OR text_bytes <= $3
ORDER BY id
