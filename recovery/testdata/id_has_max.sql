-- id_has_max
-- $1 table
-- $2 column
SELECT EXISTS (SELECT 1 FROM pg_attribute AS a
	JOIN pg_proc AS p ON p.proname = 'max' AND p.pronamespace = 'pg_catalog'::regnamespace AND p.pronargs = 1 AND p.proargtypes[0] = a.atttypid
	JOIN pg_aggregate AS g ON g.aggfnoid = p.oid
	WHERE a.attrelid = to_regclass($1) AND a.attname = $2 AND NOT a.attisdropped)
