{{/*
applied_migrations: the migrations applied to the sidecar schema, by
version (Status, when its schema_migrations table exists).

No parameters.
*/ -}}
SELECT version, name, applied_at FROM {{.Migrations}} ORDER BY version
