{{/*
settle_parked: a slice of a task's parked attempts rows of one state
(held; waiting, on a sweep) and those whose instance is no longer where
it was left. Looked at first, outside a transaction (Close off: the
counts and the next slice's start); closed, only when there is one, in
a fenced transaction (Close on: each row ends succeeded or cancelled,
one event each). The settle pass renders it (recovery/settle.go,
settleParked); the golden files in recovery/testdata/settle_parked/ show
it rendered.

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, task   the task's workflow and name
  cursor_at, cursor_instance
                   the last row of the slice before, in the order of
                   the state's index (absent on the first slice)
  limit            rows looked at
  ends             the task's end states
  what             the reasons' beginning ("hold cancelled")
  run              (Close) the run the events belong to
*/ -}}
WITH h AS MATERIALIZED (
	-- The slice, in the order of the state's partial index (the state
	-- a literal, so that the planner reads it).
	SELECT a.ctid AS tid, a.instance, a.attempt, a.left_in, a.{{.Order}} AS at FROM {{.Attempts}} AS a
	WHERE a.workflow = {{arg "workflow"}} AND a.state = {{.State}} AND a.task = {{arg "task"}}
	{{- if .Cursor}} AND (a.{{.Order}}, a.instance) > ({{arg "cursor_at"}}::timestamptz, {{arg "cursor_instance"}}::text){{end}}
	-- No row locks: most rows looked at stay as they are; the
	-- update takes those it changes, by tuple id and state (a
	-- row changed since is not found).
	ORDER BY a.{{.Order}}, a.instance LIMIT {{arg "limit"}}
), x AS MATERIALIZED (
	-- Those whose instance is no longer where it was left:
	{{- if .Waiting}} a waiting
	-- retry's instance reached an end state or is gone
	{{- else}} a hold's
	-- instance moved anywhere or is gone{{end}}.
	SELECT j.*, j.st = ANY ({{arg "ends"}}::text[]) AS ended, CASE
			WHEN j.st IS NULL THEN {{arg "what"}} || ': the instance no longer exists'
			WHEN j.st = ANY ({{arg "ends"}}::text[]) THEN {{arg "what"}} || ': the instance reached end state ' || j.st
			ELSE {{arg "what"}} || ': instance moved to ' || j.st || ' by someone else' END AS reason
	FROM (SELECT h.*, (SELECT t.{{.Status}}::text FROM {{.Table}} AS t WHERE t.{{.ID}} = h.instance::{{.IDType}}) AS st FROM h) AS j
	WHERE {{if .Waiting}}j.st IS NULL OR j.st = ANY ({{arg "ends"}}::text[]){{else}}j.st IS DISTINCT FROM j.left_in{{end}}
)
{{- if .Close}}, upd AS (
	-- A row that ended is succeeded (ended_parked: its retry or hold
	-- never ran), any other cancelled.
	UPDATE {{.Attempts}} AS a SET state = CASE WHEN x.ended THEN 'succeeded' ELSE 'cancelled' END, since = now(),
		next_attempt_at = NULL, last_reason = x.reason, ended_parked = coalesce(x.ended, false)
	FROM x WHERE a.ctid = x.tid AND a.state = {{.State}}
	RETURNING x.instance, x.left_in, x.st, x.attempt, x.reason
), ev AS (
	-- One event per row closed.
	INSERT INTO {{.Events}} (kind, run_id, workflow, instance, task, from_state, to_state, attempt, reason)
	SELECT {{.Kind}}, {{arg "run"}}, {{arg "workflow"}}, x.instance, {{arg "task"}}, x.left_in, x.st, x.attempt, x.reason
	FROM upd x
)
SELECT count(*) FROM upd
{{- else}}
-- The rows looked at, the last one (the next slice's start) and those
-- to close.
SELECT (SELECT count(*) FROM h), coalesce((SELECT at::text FROM h ORDER BY at DESC, instance DESC LIMIT 1), ''),
	coalesce((SELECT instance FROM h ORDER BY at DESC, instance DESC LIMIT 1), ''), (SELECT count(*) FROM x)
{{- end}}
