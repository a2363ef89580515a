{{/*
cluster_changes: the changes of the cluster since a time, oldest first:
masters taking office and losing it, nodes registering, changing status,
leaving and being forgotten, grades changing (Log.Changes, the console's
day), through the event_log view, which gives a run's events (grades)
their master and term back. The BRIN index on at finds the window; the
kinds keep the few rows of a day that are not about instances.

Parameters (numbered $1, $2, … in the order they first appear):
  since  the window's start
  limit  rows at the most
*/ -}}
SELECT id, at, kind, actor, term, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason, via
FROM {{.EventLog}}
WHERE at >= {{arg "since"}} AND kind IN ('master_elected', 'master_lost', 'node_registered', 'node_status', 'node_deregistered',
	'node_forgotten', 'node_grade')
ORDER BY id LIMIT {{arg "limit"}}
