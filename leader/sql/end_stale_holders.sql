{{/*
end_stale_holders: ends the transactions that block a backend (the one
waiting in raise_term, behind an earlier master's fenced transaction
that holds the term row) and have been idle in a transaction for longer
than the age given: their process stopped mid-way. Returns each one
ended as "application (pid n)" (Fence.TakeOffice's raise, every half
of that age while raise_term waits). It reads only the server's views.

Parameters (numbered $1, $2, … in the order they first appear):
  pid   the backend that waits (pg_backend_pid() of raise_term's)
  idle  how long a blocker must have been idle, in seconds
*/ -}}
WITH stale AS MATERIALIZED (
	SELECT a.pid, a.application_name FROM pg_stat_activity a
	WHERE a.pid = ANY (pg_blocking_pids({{arg "pid"}}))
	  AND a.state IN ('idle in transaction', 'idle in transaction (aborted)')
	  AND a.state_change < now() - make_interval(secs => {{arg "idle"}}))
SELECT format('%s (pid %s)', application_name, pid) FROM stale WHERE pg_terminate_backend(pid)
