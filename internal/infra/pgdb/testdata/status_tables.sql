-- status_tables
-- $1 schema
SELECT
	to_regclass($1 || '.schema_migrations') IS NOT NULL AS migrations,
	to_regclass($1 || '.nodes') IS NOT NULL AS nodes,
	to_regclass($1 || '.cluster_identity') IS NOT NULL AS identity,
	EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1 || '.nodes')
		AND attname = 'schema_version' AND NOT attisdropped) AS node_schema
