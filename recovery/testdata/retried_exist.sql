-- retried_exist
-- $1 workflow
-- $2 task
SELECT EXISTS (SELECT 1 FROM "enginehealth".attempts
	WHERE workflow = $1 AND task = $2 AND state = 'retried')
