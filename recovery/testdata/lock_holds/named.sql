-- lock_holds: the holds of the instances named
-- $1 workflows
-- $2 instances
SELECT workflow, instance, task, left_in FROM "enginehealth".attempts
WHERE state = 'held' AND (workflow, instance) IN (SELECT * FROM unnest($1::text[], $2::text[]))
ORDER BY workflow, instance FOR UPDATE SKIP LOCKED
