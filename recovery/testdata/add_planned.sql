-- add_planned
-- $1 n
-- $2 run
UPDATE "enginehealth".runs SET planned = planned + $1 WHERE id = $2
