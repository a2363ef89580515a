-- end_stale_holders
-- $1 pid
-- $2 idle
WITH stale AS MATERIALIZED (
	SELECT a.pid, a.application_name FROM pg_stat_activity a
	WHERE a.pid = ANY (pg_blocking_pids($1))
	  AND a.state IN ('idle in transaction', 'idle in transaction (aborted)')
	  AND a.state_change < now() - make_interval(secs => $2))
SELECT format('%s (pid %s)', application_name, pid) FROM stale WHERE pg_terminate_backend(pid)
