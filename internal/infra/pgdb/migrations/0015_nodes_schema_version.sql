-- The schema version the binary of each node knows (its newest
-- migration), written when the node registers: `enginehealth migrate
-- --status` names the nodes a database or a migration is ahead of.
-- NULL: a binary older than this migration, which knows at most 14.
ALTER TABLE nodes ADD COLUMN schema_version integer;
