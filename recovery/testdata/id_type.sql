-- id_type
-- $1 table
-- $2 column
SELECT format_type(a.atttypid, a.atttypmod) AS type,
	EXISTS (SELECT 1 FROM pg_proc AS p JOIN pg_aggregate AS g ON g.aggfnoid = p.oid
		WHERE p.proname = 'max' AND p.pronamespace = 'pg_catalog'::regnamespace AND p.pronargs = 1 AND p.proargtypes[0] = a.atttypid) AS has_max
FROM pg_attribute AS a
WHERE a.attrelid = to_regclass($1) AND a.attname = $2 AND NOT a.attisdropped
