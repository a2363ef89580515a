-- node_schemas_with_version
SELECT name, hostname, status, version, last_active, schema_version AS schema_version
FROM "enginehealth".nodes ORDER BY name
