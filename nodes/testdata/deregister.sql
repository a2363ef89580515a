-- deregister
-- $1 name
DELETE FROM "enginehealth".nodes WHERE name = $1
