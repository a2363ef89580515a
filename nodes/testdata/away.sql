-- away
-- $1 node
-- $2 since
SELECT NOT EXISTS (SELECT 1 FROM "enginehealth".nodes
	WHERE name = $1 AND last_active >= $2)
