{{/*
settle_events: one batch of a task's retries at once that wrote no
attempts row (their event holds the attempt: policy_batch), settled from
the events after the task's cursor: each case still the event's (no
attempts row took it over, no later retry at once of the instance came
after it) whose outcome is known now is closed as settle_batch closes a
retried row, with one event, and gets its attempts row in that final
state (the retry statistics and a later case read it there: a success
resets the count); one still running past the horizon gets its row in
state retried, which settle_batch closes later. Each row takes the
case's retries and nodes from the events (HistoryJoin over o.instance).
The settle pass renders it (recovery/settle.go, settleEvents) under the
repairer's events lock; the golden files in
recovery/testdata/settle_events/ show it rendered.

A pass reads the events after the cursor once (Open false: keyset
batches from after up to upto); the next passes of the same master read
again only the cases it left open (Open true: their events by id), and
the events written since (from the newest it read).

Parameters (numbered $1, $2, … in the order they first appear):
  open            (Open) the events of cases left open, to read again
  after           the task's cursor, or the last event looked at before
  upto            the newest event id of the pass (committed: the lock)
  workflow, task  the task's workflow and name
  batch_size      retry events per batch
  ends            the task's end states
  begin, interim  the task's own states: a retry there still runs
  failed          the task's failed state
  horizon_ms      how long a case is followed in the events
  run             the run the events belong to
*/ -}}
WITH r AS MATERIALIZED (
	-- Up to batch_size retries at once of the task after the cursor (or
	-- the open cases given), in the order written (the events' primary
	-- key).
	SELECT e.id, e.instance, e.at, e.from_state FROM {{.Events}} AS e
	WHERE {{if .Open}}e.id = ANY ({{arg "open"}}){{else}}e.id > {{arg "after"}} AND e.id <= {{arg "upto"}}{{end}}
	  AND e.kind = {{.KindRepair}} AND e.attempt IS NOT NULL
	  AND e.workflow = {{arg "workflow"}} AND e.task = {{arg "task"}}
	ORDER BY e.id LIMIT {{arg "batch_size"}}
), o AS MATERIALIZED (
	-- The cases still the event's: no attempts row, no later retry at
	-- once of the instance (a probe each: the primary key, the index on
	-- instance), with the instance's state now (NULL: the row is gone).
	SELECT r.*, (SELECT t.{{.Status}}::text FROM {{.Table}} AS t WHERE t.{{.ID}} = r.instance::{{.IDType}}) AS st
	FROM r
	{{.OpenCase}}
	WHERE kept.found IS NULL AND later.found IS NULL
), x AS NOT MATERIALIZED (
	-- The outcome: '' while the retry still runs (begin, interim),
	-- and, under an on_failure policy, when the engine failed it (the
	-- policy decides it). Worked out where it is read (no copy).
	SELECT o.*, {{.Outcome}} AS next FROM o
), y AS MATERIALIZED (
	-- Closed now, or still running past the horizon, with the case's
	-- retries and nodes (read for these only: a pass after a mass
	-- interruption finds most cases still running, each pass) and the
	-- reason said.
	SELECT h.*, CASE next
			{{.Reason}}
			ELSE what || ' still runs (in ' || st || '): followed in this row'
		END AS reason
	FROM (SELECT o.*, a.attempt, a.nodes, a.last_node, 'retry ' || a.attempt AS what
		FROM x AS o {{.HistoryJoin}}
		WHERE o.next <> '' OR o.at < now() - {{arg "horizon_ms"}} * interval '1 millisecond') AS h
), rows_written AS (
	-- Its attempts row: the case's outcome, or still retried since the
	-- retry was made (since: the failure path decides a failure stamped
	-- after it).
	INSERT INTO {{.Attempts}} (workflow, instance, task, attempt, state, cause, left_in, since, last_attempt_at, last_node, nodes, last_reason)
	SELECT {{arg "workflow"}}, y.instance, {{arg "task"}}, y.attempt, CASE WHEN y.next = '' THEN 'retried' ELSE y.next END, 'interrupt',
		y.from_state, CASE WHEN y.next = '' THEN y.at ELSE now() END, y.at, y.last_node, y.nodes, y.reason
	FROM y
	ON CONFLICT DO NOTHING
	RETURNING 1
), ev AS (
	-- One event per case closed.
	INSERT INTO {{.Events}} (kind, run_id, workflow, instance, task, to_state, attempt, reason)
	SELECT CASE y.next WHEN 'succeeded' THEN {{.KindSucceeded}} WHEN 'failed' THEN {{.KindFailed}} ELSE {{.KindCancelled}} END,
		{{arg "run"}}, {{arg "workflow"}}, y.instance, {{arg "task"}}, y.st, y.attempt, y.reason
	FROM y WHERE y.next <> ''
)
-- The events looked at, the last one (the next batch's start), the
-- cases left open, in order (the cursor stops before the first; the
-- next pass reads them again), the outcomes, the rows to write and
-- those written (an operator's row written meanwhile: the batch fails,
-- the next pass sees the row).
SELECT (SELECT count(*) FROM r), coalesce((SELECT max(id) FROM r), {{arg "after"}}),
	(SELECT array_agg(x.id ORDER BY x.id) FROM x WHERE x.next = '' AND x.at >= now() - {{arg "horizon_ms"}} * interval '1 millisecond'),
	(SELECT count(*) FROM y WHERE next = 'succeeded'), (SELECT count(*) FROM y WHERE next = 'failed'),
	(SELECT count(*) FROM y WHERE next = 'cancelled'), (SELECT count(*) FROM y), (SELECT count(*) FROM rows_written)
