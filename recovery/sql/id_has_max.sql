{{/*
id_has_max: whether PostgreSQL's max() takes a table column's type as it
is (repairTask: a task's later batches then read their cursor, the
greatest id picked, with max in the pass that counts the batch, instead
of sorting the pick for it; a type without, uuid, keeps the sort). max
orders as ORDER BY does: by the type's default btree order, in the
column's collation.

Parameters (numbered $1, $2, … in the order they first appear):
  table   the table, quoted (claims.Ident)
  column  the column's name
*/ -}}
SELECT EXISTS (SELECT 1 FROM pg_attribute AS a
	JOIN pg_proc AS p ON p.proname = 'max' AND p.pronamespace = 'pg_catalog'::regnamespace AND p.pronargs = 1 AND p.proargtypes[0] = a.atttypid
	JOIN pg_aggregate AS g ON g.aggfnoid = p.oid
	WHERE a.attrelid = to_regclass({{arg "table"}}) AND a.attname = {{arg "column"}} AND NOT a.attisdropped)
