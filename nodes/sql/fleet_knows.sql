{{/*
fleet_knows: whether every node record names a binary that knows the
schema version given or a later one (Store.FleetKnows): a record
without one (a binary older than migration 15) knows less.

Parameters (numbered $1, $2, … in the order they first appear):
  version  the schema version
*/ -}}
SELECT NOT EXISTS (SELECT 1 FROM {{.Nodes}} AS n WHERE coalesce(n.schema_version, 0) < {{arg "version"}})
