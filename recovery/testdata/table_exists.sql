-- table_exists
-- $1 table
SELECT to_regclass($1) IS NOT NULL
