{{/*
status_tables: which of the sidecar schema's tables exist (schema
version, nodes, cluster identity), and whether the nodes table has the
column schema_version (Status, which reads only what is there: a schema
not migrated, or migrated by an older binary). Its text is fixed.

Parameters (numbered $1, $2, … in the order they first appear):
  schema  the sidecar schema's name, quoted
*/ -}}
SELECT
	to_regclass({{arg "schema"}} || '.schema_migrations') IS NOT NULL AS migrations,
	to_regclass({{arg "schema"}} || '.nodes') IS NOT NULL AS nodes,
	to_regclass({{arg "schema"}} || '.cluster_identity') IS NOT NULL AS identity,
	EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass({{arg "schema"}} || '.nodes')
		AND attname = 'schema_version' AND NOT attisdropped) AS node_schema
