-- ack_lock
-- $1 name
SELECT status FROM "enginehealth".nodes WHERE name = $1 FOR UPDATE
