{{/*
record_migration: records a migration as applied (Migrate, after
running it in the same transaction, with the sidecar schema as its
search_path).

Parameters (numbered $1, $2, … in the order they first appear):
  version  the migration's version
  name     its name
*/ -}}
INSERT INTO schema_migrations (version, name) VALUES ({{arg "version"}}, {{arg "name"}})
