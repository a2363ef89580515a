-- table_columns
-- $1 table
SELECT attname::text FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped
