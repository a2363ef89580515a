-- deregister_keep
-- $1 name
UPDATE "enginehealth".nodes SET is_master = false WHERE name = $1
