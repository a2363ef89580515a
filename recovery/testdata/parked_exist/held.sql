-- parked_exist: whether a task has holds
-- $1 workflow
-- $2 task
SELECT EXISTS (SELECT 1 FROM "enginehealth".attempts
	WHERE workflow = $1 AND state = 'held' AND task = $2)
