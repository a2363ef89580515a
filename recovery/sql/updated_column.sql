{{/*
updated_column: what an on_failure policy needs of a workflow's
updated_column (checkUpdatedColumn, catalog.go): its type (NULL when
there is no such column), and whether a valid, non-partial B-tree index
leads with (status_column, updated_column), through which new failures
are read without scanning old ones.

Parameters (numbered $1, $2, … in the order they first appear):
  table    the instance table, quoted (claims.Ident)
  updated  the updated column's name
  status   the status column's name
*/ -}}
SELECT
	(SELECT a.atttypid::regtype::text FROM pg_attribute a
	  WHERE a.attrelid = to_regclass({{arg "table"}}) AND a.attname = {{arg "updated"}} AND NOT a.attisdropped) AS type,
	EXISTS (SELECT 1 FROM pg_index i
	  JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam AND am.amname = 'btree'
	  JOIN pg_attribute s ON s.attrelid = i.indrelid AND s.attname = {{arg "status"}}
	  JOIN pg_attribute u ON u.attrelid = i.indrelid AND u.attname = {{arg "updated"}}
	  WHERE i.indrelid = to_regclass({{arg "table"}}) AND i.indpred IS NULL AND i.indisvalid AND i.indnkeyatts >= 2
	    AND i.indkey[0] = s.attnum AND i.indkey[1] = u.attnum) AS indexed
