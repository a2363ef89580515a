{{/*
settle_cursor: where the settle pass of a task's retries at once starts
(the last event id it went past with no case left open before it; no row
until a repair wrote a retry at once of the task), and the newest event
now, where every task's pass stops (Repairer.settleEvents, settle.go).

Parameters (numbered $1, $2, … in the order they first appear):
  workflows, tasks  the configured tasks, pairwise
*/ -}}
SELECT c.workflow, c.task, c.after_id, (SELECT coalesce(max(e.id), 0) FROM {{.Events}} AS e) AS upto
FROM {{.Cursors}} AS c
WHERE (c.workflow, c.task) IN (SELECT * FROM unnest({{arg "workflows"}}::text[], {{arg "tasks"}}::text[]))
