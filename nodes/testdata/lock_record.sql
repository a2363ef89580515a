-- lock_record
-- $1 name
SELECT status, incarnation, hostname, active_since FROM "enginehealth".nodes WHERE name = $1 FOR UPDATE
