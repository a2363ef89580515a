-- batch_settings
-- $1 ms
-- $2 kb
SELECT CASE WHEN $1 <> '' THEN set_config('lock_timeout', $1, true) END,
	set_config('work_mem', greatest(pg_size_bytes(current_setting('work_mem')) / 1024, $2::bigint)::text || 'kB', true)
