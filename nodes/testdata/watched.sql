-- watched
SELECT node, grade, changed_at, workflow, task, instance, last_interruption_at, watching, seen_claimant, rule FROM "enginehealth".node_grades
WHERE grade = 'WARNING' AND watching ORDER BY node FOR UPDATE
