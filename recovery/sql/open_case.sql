{{/*
open_case: joins to a retry at once's event (Event: its alias) whether
its case is still the event's, as open: a probe each of the attempts
rows' primary key (kept.found: a row took the case over) and of the
events' index on instance (later.found: a later retry at once of the
instance superseded it); a statement keeps the event when both are
NULL. Probes, not NOT EXISTS: at thousands of events the planner would
anti-join a whole events table. Not a statement: the OpenCase slot of
settle_events and retry_stats, its parameters numbered with theirs.

Parameters (named; numbered by the statement that holds it):
  workflow, task  the task
*/ -}}
LEFT JOIN LATERAL (SELECT 1 AS found FROM {{.Attempts}} AS a
		WHERE a.workflow = {{arg "workflow"}} AND a.instance = {{.Event}}.instance AND a.task = {{arg "task"}} LIMIT 1) AS kept ON true
	LEFT JOIN LATERAL (SELECT 1 AS found FROM {{.Events}} AS l
		WHERE l.instance = {{.Event}}.instance AND l.workflow = {{arg "workflow"}} AND l.task = {{arg "task"}} AND l.id > {{.Event}}.id
		  AND l.kind = {{.KindRepair}} AND l.attempt IS NOT NULL LIMIT 1) AS later ON true
