-- reset_grade
-- $1 reason
-- $2 node
UPDATE "enginehealth".node_grades SET grade = 'NORMAL', changed_at = now(),
	workflow = NULL, task = NULL, instance = NULL, reason = $1, watching = false, seen_claimant = NULL, rule = 'reset',
	counts_from = now()
WHERE node = $2
