-- clear_master
-- $1 name
-- $2 incarnation
UPDATE "enginehealth".nodes SET is_master = false WHERE name = $1 AND incarnation = $2 AND is_master
