-- instance_cases
-- $1 instance
-- $2 workflow
SELECT e.task, e.attempt, e.node, e.at, e.reason, coalesce(e.from_state, '') AS from_state FROM "enginehealth".events AS e
WHERE e.instance = $1 AND e.workflow = $2 AND e.task IS NOT NULL
  AND e.kind = 'instance_repaired' AND e.attempt IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM "enginehealth".attempts AS a WHERE a.workflow = e.workflow AND a.instance = e.instance AND a.task = e.task)
ORDER BY e.id
