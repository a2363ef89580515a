{{/*
run_counts: the events of a run about workflow tasks (repairs, expiries,
retries, holds), counted by workflow, task, kind and target state
(Log.RunCounts). The run's start and end bound their time, so the BRIN
index on at finds them.

Parameters (numbered by hand):
  $1  run   the run's id
  $2  from  its start
  $3  to    its end (now, for a run going on)
*/ -}}
SELECT workflow, coalesce(task, '') AS task, kind, coalesce(to_state, '') AS to_state, count(*) AS count
FROM {{.Events}} WHERE run_id = $1 AND at >= $2 AND at <= $3 AND workflow IS NOT NULL
GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
