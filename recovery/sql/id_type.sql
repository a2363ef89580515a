{{/*
id_type: the SQL type of a table's column, as the catalog names it, and
whether PostgreSQL's max() takes it as it is. The type: a workflow's id
column, to cast an attempts row's instance text to it, so that the
instance table is read through its primary key (settle.go, stats.go).
max: a task's later batches then read their cursor, the greatest id
picked, with max in the pass that counts the batch, instead of sorting
the pick for it; a type without, uuid, keeps the sort (repairTask). max
orders as ORDER BY does: by the type's default btree order, in the
column's collation.

Parameters (numbered $1, $2, … in the order they first appear):
  table   the table, quoted (claims.Ident)
  column  the column's name
*/ -}}
SELECT format_type(a.atttypid, a.atttypmod) AS type,
	EXISTS (SELECT 1 FROM pg_proc AS p JOIN pg_aggregate AS g ON g.aggfnoid = p.oid
		WHERE p.proname = 'max' AND p.pronamespace = 'pg_catalog'::regnamespace AND p.pronargs = 1 AND p.proargtypes[0] = a.atttypid) AS has_max
FROM pg_attribute AS a
WHERE a.attrelid = to_regclass({{arg "table"}}) AND a.attname = {{arg "column"}} AND NOT a.attisdropped
