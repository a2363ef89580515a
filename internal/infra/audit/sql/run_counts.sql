{{/*
run_counts: the events of a run about workflow tasks (repairs, expiries,
retries, holds), counted by workflow, task, kind and target state
(Log.RunCounts), prepared once per schema (New). The run's start and end
bound their time, so the BRIN index on at finds them.

Parameters (numbered $1, $2, … in the order they first appear):
  run   the run's id
  from  its start
  to    its end (now, for a run going on)
*/ -}}
SELECT workflow, coalesce(task, '') AS task, kind, coalesce(to_state, '') AS to_state, count(*) AS count
FROM {{.Events}} WHERE run_id = {{arg "run"}} AND at >= {{arg "from"}} AND at <= {{arg "to"}} AND workflow IS NOT NULL
GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
