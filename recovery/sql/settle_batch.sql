{{/*
settle_batch: one batch of a task's retried attempts rows, closed once
their outcome is known, one event each. The settle pass renders it
(recovery/settle.go, settleBatch); the golden files in
recovery/testdata/settle_batch/ show it rendered.

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, task  the task's workflow and name
  after           (After) the last instance of the batch before
  batch_size      rows per batch
  ends            the task's end states
  begin, interim  the task's own states: a retry there still runs
  failed          the task's failed state
  run             the run the events belong to
*/ -}}
WITH a AS MATERIALIZED (
	-- Up to batch_size retried rows after the last one, locked (the
	-- partial index of retried rows, in instance order).
	SELECT a.ctid AS tid, a.instance, a.attempt, a.manual FROM {{.Attempts}} AS a
	WHERE a.workflow = {{arg "workflow"}} AND a.task = {{arg "task"}} AND a.state = 'retried'{{if .After}} AND a.instance > {{arg "after"}}{{end}}
	ORDER BY a.instance LIMIT {{arg "batch_size"}} FOR UPDATE SKIP LOCKED
), j AS MATERIALIZED (
	-- Each with its instance's state (NULL: the row is gone), read
	-- through the primary key.
	SELECT a.*, (SELECT t.{{.Status}}::text FROM {{.Table}} AS t WHERE t.{{.ID}} = a.instance::{{.IDType}}) AS st FROM a
), x AS MATERIALIZED (
	-- The outcome: '' while the retry still runs (begin, interim),
	-- and, under an on_failure policy, when the engine failed it (the
	-- policy decides it).
	SELECT j.*, {{.Outcome}} AS next,
		CASE WHEN j.manual > 0 AND j.attempt = 0 THEN 'manual retry ' || j.manual ELSE 'retry ' || j.attempt END AS what
	FROM j
), y AS (
	SELECT x.*, CASE next
			{{.Reason}}
		END AS reason
	FROM x WHERE x.next <> ''
), upd AS (
	UPDATE {{.Attempts}} AS a SET state = y.next, since = now(), last_reason = y.reason, ended_parked = false
	FROM y WHERE a.ctid = y.tid
	RETURNING y.instance, y.st, y.attempt, y.next, y.reason
), ev AS (
	-- One event per row closed.
	INSERT INTO {{.Events}} (kind, run_id, workflow, instance, task, to_state, attempt, reason)
	SELECT CASE x.next WHEN 'succeeded' THEN {{.KindSucceeded}} WHEN 'failed' THEN {{.KindFailed}} ELSE {{.KindCancelled}} END,
		{{arg "run"}}, {{arg "workflow"}}, x.instance, {{arg "task"}}, x.st, x.attempt, x.reason
	FROM upd x
)
-- The rows looked at, the last one (the next batch's start) and the
-- outcomes.
SELECT (SELECT count(*) FROM a), coalesce((SELECT max(instance) FROM a), ''),
	count(*) FILTER (WHERE next = 'succeeded'), count(*) FILTER (WHERE next = 'failed'),
	count(*) FILTER (WHERE next = 'cancelled')
FROM upd
