{{/*
record_migration: records a migration as applied (Migrate, after
running it in the same transaction, with the sidecar schema as its
search_path).

Parameters (numbered by hand):
  $1  version  the migration's version
  $2  name     its name
*/ -}}
INSERT INTO schema_migrations (version, name) VALUES ($1, $2)
