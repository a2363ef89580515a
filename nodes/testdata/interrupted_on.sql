-- interrupted_on
-- $1 workflows
-- $2 instances
-- $3 tasks
-- $4 retention
SELECT s.workflow, s.instance, s.task, array_agg(DISTINCT i.node ORDER BY i.node) AS nodes
FROM unnest($1::text[], $2::text[], $3::text[]) AS s(workflow, instance, task)
JOIN "enginehealth".interruptions i ON i.workflow = s.workflow AND i.instance = s.instance AND i.task = s.task
	AND i.at > now() - make_interval(secs => $4)
GROUP BY 1, 2, 3
