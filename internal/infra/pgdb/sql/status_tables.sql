{{/*
status_tables: which of the sidecar schema's tables exist (schema
version, nodes, cluster identity), and whether the nodes table has the
column schema_version (Status, which reads only what is there: a schema
not migrated, or migrated by an older binary). The pgdb package renders
its files with text/template alone (it may not import
internal/infra/sqltext, another package of its layer).

Parameters (numbered by hand):
  $1  schema  the sidecar schema's name, quoted
*/ -}}
SELECT
	to_regclass($1 || '.schema_migrations') IS NOT NULL AS migrations,
	to_regclass($1 || '.nodes') IS NOT NULL AS nodes,
	to_regclass($1 || '.cluster_identity') IS NOT NULL AS identity,
	EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1 || '.nodes')
		AND attname = 'schema_version' AND NOT attisdropped) AS node_schema
