-- lock_timeout
-- $1 ms
SELECT set_config('lock_timeout', $1, true)
