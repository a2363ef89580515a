{{/*
node_schemas: every node record, by name, with the schema version its
binary knows (Status, when the nodes table exists). SchemaVersion: the
nodes table has the column schema_version; without it (a schema
migrated by a binary before it), it is NULL.

No parameters.
*/ -}}
SELECT name, hostname, status, version, last_active, {{if .SchemaVersion}}schema_version{{else}}NULL::integer{{end}} AS schema_version
FROM {{.Nodes}} ORDER BY name
