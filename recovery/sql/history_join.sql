{{/*
history_join: joins to an instance row b its attempts row as a (tid,
attempt, nodes, state, since, stamp), and again: whether a parked row's
instance (waiting or held) ran again since it was parked (the SQL
condition Again, Repairer.againSQL). Not a statement: rendered by
Repairer.historyJoin (attempts.go) and given to policy_batch, count_task
and plan_task as their HistoryJoin slot, its parameters numbered with
theirs.

Parameters (named; numbered by the statement that holds it):
  workflow, task  the task's workflow and name
*/ -}}
LEFT JOIN LATERAL (
		-- LIMIT 1 keeps this a probe of the primary key per row,
		-- whatever the planner thinks of the table's size.
		SELECT a.ctid AS tid, a.attempt, a.nodes, a.state, a.since, a.stamp,
			CASE WHEN a.state IN ('waiting', 'held') THEN {{.Again}} ELSE false END AS again
		FROM {{.Attempts}} AS a
		WHERE a.workflow = {{arg "workflow"}} AND a.instance = b.{{.ID}}::text AND a.task = {{arg "task"}} LIMIT 1) AS a ON true
