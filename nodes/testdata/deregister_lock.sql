-- deregister_lock
-- $1 name
-- $2 incarnation
SELECT status FROM "enginehealth".nodes WHERE name = $1 AND incarnation = $2 FOR UPDATE
