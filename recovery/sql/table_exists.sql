{{/*
table_exists: whether a configured table exists, as the database
resolves its name (CheckCatalog, catalog.go).

Parameters (numbered $1, $2, … in the order they first appear):
  table  the table, quoted (claims.Ident)
*/ -}}
SELECT to_regclass({{arg "table"}}) IS NOT NULL
