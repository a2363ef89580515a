-- write
INSERT INTO "enginehealth".events (kind, actor, term, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason, via)
	VALUES (:kind, nullif(:actor, ''), :term, :run_id, :node, :workflow, :instance, :task, :from_state, :to_state, :attempt, :reason, nullif(:via, ''))
