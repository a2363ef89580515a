-- lock_grade
-- $1 node
SELECT node, grade, changed_at, workflow, task, instance, last_interruption_at, watching, seen_claimant, rule FROM "enginehealth".node_grades WHERE node = $1 FOR UPDATE
