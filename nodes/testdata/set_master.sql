-- set_master
-- $1 name
-- $2 incarnation
UPDATE "enginehealth".nodes SET is_master = (name = $1 AND incarnation = $2)
WHERE is_master OR (name = $1 AND incarnation = $2)
