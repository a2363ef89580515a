-- update_grade
-- $1 grade
-- $2 changed
-- $3 workflow
-- $4 task
-- $5 instance
-- $6 reason
-- $7 watching
-- $8 rule
-- $9 node
UPDATE "enginehealth".node_grades SET grade = $1, changed_at = CASE WHEN $2 THEN now() ELSE changed_at END,
	workflow = $3, task = $4, instance = $5, reason = $6,
	watching = $7, seen_claimant = NULL, rule = $8
WHERE node = $9
