-- quiet
-- $1 quiet_period
SELECT node, grade, changed_at, workflow, task, instance, last_interruption_at, watching, seen_claimant, rule FROM "enginehealth".node_grades
WHERE grade <> 'NORMAL' AND greatest(changed_at, last_interruption_at) < now() - make_interval(secs => $1)
ORDER BY node FOR UPDATE
