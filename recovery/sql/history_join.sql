{{/*
history_join: joins to an instance (Instance: its id as text, e.g. of
the instance row b) its history in the task as a (tid, attempt, nodes,
state, since, stamp, again, last_at, last_node): its attempts row, if it
has one; else, if retries at once of the current case are in the events
(they write no row), what they say. again: whether a parked
row's instance (waiting or held) ran again since it was parked (the SQL
condition Again, Repairer.againSQL). Not a statement: rendered by
Repairer.historyJoin (attempts.go) and given to plan_task and
settle_events as their HistoryJoin slot, its parameters numbered with
theirs.

The retries at once of an instance without a row are read from the
events (case_retries: tid NULL, no row to update; state retried), only
when the attempts row is missing (the first branch's row ends the
LIMIT). A repair batch reads them in the same way, instance by
instance (policy_batch's known).

Parameters (named; numbered by the statement that holds it):
  workflow, task  the task's workflow and name
*/ -}}
LEFT JOIN LATERAL (
		-- LIMIT 1 keeps this a probe of the primary key per row,
		-- whatever the planner thinks of the table's size.
		(SELECT a.ctid AS tid, a.attempt, a.nodes, a.state, a.since, a.stamp,
			CASE WHEN a.state IN ('waiting', 'held') THEN {{.Again}} ELSE false END AS again, a.last_attempt_at AS last_at, a.last_node
		FROM {{.Attempts}} AS a
		WHERE a.workflow = {{arg "workflow"}} AND a.instance = {{.Instance}} AND a.task = {{arg "task"}} LIMIT 1)
		UNION ALL
		(SELECT NULL::tid, h.attempt, h.nodes, 'retried', NULL::timestamptz, NULL::timestamptz, false, h.last_at, h.last_node FROM (
		{{.CaseRetries}}) AS h)
		LIMIT 1) AS a ON true