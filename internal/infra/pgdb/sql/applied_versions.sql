{{/*
applied_versions: the versions of the migrations applied, in order
(Migrate, with the sidecar schema as its search_path).

No parameters.
*/ -}}
SELECT version FROM schema_migrations ORDER BY version
