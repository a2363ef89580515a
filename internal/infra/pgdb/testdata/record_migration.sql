-- record_migration
-- $1 version
-- $2 name
INSERT INTO schema_migrations (version, name) VALUES ($1, $2)
