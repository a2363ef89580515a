-- updated_column
-- $1 table
-- $2 updated
-- $3 status
SELECT
	(SELECT a.atttypid::regtype::text FROM pg_attribute a
	  WHERE a.attrelid = to_regclass($1) AND a.attname = $2 AND NOT a.attisdropped) AS type,
	EXISTS (SELECT 1 FROM pg_index i
	  JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam AND am.amname = 'btree'
	  JOIN pg_attribute s ON s.attrelid = i.indrelid AND s.attname = $3
	  JOIN pg_attribute u ON u.attrelid = i.indrelid AND u.attname = $2
	  WHERE i.indrelid = to_regclass($1) AND i.indpred IS NULL AND i.indisvalid AND i.indnkeyatts >= 2
	    AND i.indkey[0] = s.attnum AND i.indkey[1] = u.attnum) AS indexed
