-- lock_holds: a batch of every open hold
-- $1 workflow
-- $2 limit
SELECT workflow, instance, task, left_in FROM "enginehealth".attempts
WHERE state = 'held' AND ($1 = '' OR workflow = $1)
ORDER BY workflow, since LIMIT $2 FOR UPDATE SKIP LOCKED
