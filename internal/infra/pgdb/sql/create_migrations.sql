{{/*
create_migrations: the table of the migrations applied, created before
the first (Migrate, in its transaction, under the advisory lock, with
the sidecar schema as its search_path).

No parameters.
*/ -}}
CREATE TABLE IF NOT EXISTS schema_migrations (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now())
