-- list_newest
-- $1 after_id
-- $2 before_id
-- $3 workflow
-- $4 instance
-- $5 limit
-- $6 max_bytes
SELECT id, at, kind, actor, term, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason, via
FROM (SELECT e.*,
		row_number() OVER w AS n,
		sum(octet_length(kind) + octet_length(actor) + octet_length(reason) + coalesce(octet_length(node), 0)
			+ coalesce(octet_length(workflow), 0) + coalesce(octet_length(instance), 0) + coalesce(octet_length(task), 0)
			+ coalesce(octet_length(from_state), 0) + coalesce(octet_length(to_state), 0) + coalesce(octet_length(via), 0)) OVER w AS text_bytes
	FROM "enginehealth"."event_log" e
	WHERE id > $1 AND id < $2 AND workflow = $3 AND instance = $4
	WINDOW w AS (ORDER BY id DESC)
	ORDER BY id DESC LIMIT $5) page
WHERE n = 1 OR text_bytes <= $6
ORDER BY id DESC
