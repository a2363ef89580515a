{{/*
table_columns: the names of a table's columns (CheckCatalog, catalog.go:
every configured column must be one).

Parameters (numbered $1, $2, … in the order they first appear):
  table  the table, quoted (claims.Ident)
*/ -}}
SELECT attname::text FROM pg_attribute
WHERE attrelid = to_regclass({{arg "table"}}) AND attnum > 0 AND NOT attisdropped
