-- node_schemas
SELECT name, hostname, status, version, last_active, NULL::integer AS schema_version
FROM "enginehealth".nodes ORDER BY name
