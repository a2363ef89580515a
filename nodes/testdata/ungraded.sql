-- ungraded
-- $1 batch
SELECT id, at, node, workflow, task, instance FROM "enginehealth".interruptions
WHERE NOT graded ORDER BY id LIMIT $1 FOR UPDATE
