{{/*
id_type: the SQL type of a table's column, as the catalog names it
(Repairer.idType, settle.go: a workflow's id column, to cast an attempts
row's instance text to it, so that the instance table is read through
its primary key).

Parameters (numbered $1, $2, … in the order they first appear):
  table   the table, quoted (claims.Ident)
  column  the column's name
*/ -}}
SELECT format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = to_regclass({{arg "table"}}) AND attname = {{arg "column"}} AND NOT attisdropped
