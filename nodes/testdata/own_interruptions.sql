-- own_interruptions
-- $1 node
-- $2 window
-- $3 retention
SELECT i.workflow, i.task, i.instance, i.graded, max(i.at) AS at, max(i.id) AS id FROM "enginehealth".interruptions i
WHERE i.node = $1 AND i.at > now() - make_interval(secs => $2)
	AND i.at >= coalesce((SELECT counts_from FROM "enginehealth".node_grades WHERE node = $1), '-infinity')
	AND NOT EXISTS (SELECT 1 FROM "enginehealth".interruptions j WHERE j.workflow = i.workflow AND j.instance = i.instance
	                AND j.task = i.task AND j.node <> i.node AND j.at > now() - make_interval(secs => $3))
GROUP BY i.workflow, i.task, i.instance, i.graded, CASE WHEN i.graded THEN 0 ELSE i.id END
