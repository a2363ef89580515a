{{/*
policy_batch: one batch of a task's interrupted (or failed) instances,
decided by the task's retry policy and repaired in one statement: one
event per instance, which carries its attempt, and its attempts row where
one is kept (Rowless: a first interruption retried at once of an
instance without one writes none; known counts it from the events; a
second gets its row, so that a case in the events has one retry there
and the settle pass reads each open case once). The
repairer renders it (recovery/attempts.go, policyBatch); the golden files
in recovery/testdata/policy_batch/ show it rendered.

Parameters (named: Render numbers them $1, $2, … in the order they first
appear in the rendered text, which the slots change; each golden file
lists its variant's numbering at its top):
  known, prev, match, kind, to_state, state, reason, lo, hi
                 the decision table (steps), one array per column
  workflow       the task's workflow
  patterns       the non-retryable patterns, as PostgreSQL regexps
  from           the state it repairs: the interim (or failed) state
  task           the task's name
  cursor         interrupted: the last id picked; failed: the watermark,
                 the last updated_column picked (absent on a first
                 interrupted batch)
  cursor_id      failed: the last id picked at that updated_column
  hist_after, hist_upto
                 (HistRange) the window of events where the retries at
                 once of instances without a row are looked for
                 (histWindow), when narrow enough to read whole
  ids            the instances to look at (those whose claims the run
                 expired), when not all
  batch_size     instances per batch
  max_attempts   where the decision table ends
  cap_ms, jitter the backoff's cap (ms) and jitter
  run            the run the batch belongs to
  expired        the instances whose claims this run expired: their
                 repairs are interruptions of those nodes
*/ -}}
WITH s AS MATERIALIZED (
	-- The decision table: one row per (attempts row known, retries
	-- made, pattern matched); k numbers the three (decided, below, is
	-- joined on k alone, so that the planner counts one row of the table
	-- per instance). What a row decides beyond its columns is worked
	-- out here, once per row of the table, not once per instance.
	{{- /* st: the state written (a history without a state of its own
	ends failed: known holds exactly when the instance has a history);
	adds, adds_made: what the attempt and the retries made add; plain: the
	reason is said as it is (no delay, not exhausted); has_state, with
	not_retry: the attempts row is written (a state; for an instance
	without a row, with Rowless, not a retry at once); said: a scheduled
	retry's reason with its delay, where the delay is not drawn (the same
	for every instance). */}}
	SELECT s.*, s.match * ({{arg "max_attempts"}} + 2) + CASE WHEN s.known THEN s.prev + 1 ELSE 0 END AS k,
		CASE WHEN s.state = '' AND s.known THEN 'failed' ELSE s.state END AS st,
		CASE WHEN s.kind IN ('retry', 'wait') THEN 1 ELSE 0 END AS adds, CASE WHEN s.kind = 'retry' THEN 1 ELSE 0 END AS adds_made,
		s.kind <> 'wait' AND s.state <> 'exhausted' AS plain, s.state <> '' OR s.known AS has_state, s.kind <> 'retry' AS not_retry,
		{{if and .Waits (not .Drawn)}}CASE WHEN s.kind = 'wait' THEN s.reason || ' in ' || {{.Seconds .Sample}} || 's' END{{else}}NULL::text{{end}} AS said
	FROM (SELECT u.*, {{arg "cap_ms"}}::float8 AS cap, {{arg "jitter"}}::float8 AS jitter
		FROM unnest({{arg "known"}}::bool[], {{arg "prev"}}::int[], {{arg "match"}}::int[], {{arg "kind"}}::text[], {{arg "to_state"}}::text[],
			{{arg "state"}}::text[], {{arg "reason"}}::text[], {{arg "lo"}}::float8[], {{arg "hi"}}::float8[])
			AS u(known, prev, match, kind, to_state, state, reason, lo, hi)) AS s{{if .RaceWindow}} CROSS JOIN pg_sleep(0.8){{end}}
), pick AS MATERIALIZED (
	-- Up to batch_size instances in the state, unclaimed, after the
	-- cursor (the batch's keyset: the next batch starts after its last),
	-- with their attempts rows, if any. again: a parked row's instance
	-- ran again since it was parked. locked (SkipLocked): its attempts
	-- row is locked by another transaction: the instance is left for
	-- the next pass, as a locked instance row is.
	SELECT p.*, a.att, a.attempt, a.state, a.nodes, a.since, a.stamp,
		CASE WHEN a.state IN ('waiting', 'held') THEN {{.Again}} ELSE false END AS again,
		{{if .SkipLocked}}a.att IS NULL AND EXISTS (SELECT 1 FROM {{.Attempts}} AS x
			WHERE x.workflow = {{arg "workflow"}} AND x.instance = p.id::text AND x.task = {{arg "task"}}){{else}}false{{end}} AS locked
	FROM (
		SELECT b.ctid AS tid, b.{{.ID}} AS id,
			{{if .ExpiryNode}}{{.ExpiryNode}}{{else}}NULL::text{{end}} AS node,
			{{if .Patterns}}coalesce((SELECT u.i FROM unnest({{arg "patterns"}}::text[]) WITH ORDINALITY AS u(p, i)
				WHERE b.{{.ErrorColumn}}::text ~ u.p ORDER BY u.i LIMIT 1), 0){{else}}0{{end}} AS match,
			{{if .ErrorColumn}}left(b.{{.ErrorColumn}}::text, {{.MaxErrorText}}){{else}}NULL::text{{end}} AS err,
			{{if .Failure}}b.{{.Updated}}{{else}}NULL::timestamptz{{end}} AS upd
		FROM {{.Table}} AS b
		WHERE b.{{.Status}} = {{arg "from"}} AND {{.Unclaimed "b"}}
		{{- if .Failure}}
			-- From the watermark, in (updated, id) order.
			AND b.{{.Updated}} >= {{arg "cursor"}}::timestamptz
			{{- if .Cursor}} AND (b.{{.Updated}} > {{arg "cursor"}}::timestamptz OR b.{{.ID}} > {{arg "cursor_id"}}){{end}}
		{{- else if .Cursor}}
			AND b.{{.ID}} > {{arg "cursor"}}
		{{- end}}
		{{- if .IDs}}
			AND b.{{.ID}} = ANY ({{arg "ids"}})
		{{- end}}
		ORDER BY {{if .Failure}}b.{{.Updated}}, b.{{.ID}}{{else}}b.{{.ID}}{{end}} LIMIT {{arg "batch_size"}}
		{{- if .SkipLocked}} FOR NO KEY UPDATE OF b SKIP LOCKED{{end}}
	) AS p LEFT JOIN LATERAL (
		-- LIMIT 1 keeps this a probe of the primary key per instance,
		-- whatever the planner thinks of the table's size (a hash of
		-- the task's rows, on statistics older than a run that parks
		-- thousands, read them all for every batch).
		SELECT a.ctid AS att, a.instance, a.attempt, a.state, a.nodes, a.since, a.stamp FROM {{.Attempts}} AS a
		WHERE a.workflow = {{arg "workflow"}} AND a.instance = p.id::text AND a.task = {{arg "task"}} LIMIT 1
		{{- if .SkipLocked}} FOR NO KEY UPDATE SKIP LOCKED{{end}}) AS a ON true
{{- if .HistRange}}
), touched AS MATERIALIZED (
	-- (HistRange) The window of events where the retries at once of
	-- instances without an attempts row are looked for, (hist_after,
	-- hist_upto], is narrow (its span of ids): read whole, a range of
	-- the events' primary key, for the instances with one there; known
	-- probes only those.
	SELECT DISTINCT e.instance FROM {{.Events}} AS e
	WHERE e.id > {{arg "hist_after"}} AND e.id <= {{arg "hist_upto"}}
	  AND e.workflow = {{arg "workflow"}} AND e.task = {{arg "task"}} AND e.kind = {{.KindRepair}} AND e.attempt IS NOT NULL
{{- end}}
), known AS {{if .Hist}}MATERIALIZED {{end}}(
	-- Each instance to decide (not parked, or run again since{{if .Failure}}; not
	-- decided since the engine last changed it: the decision is newer
	-- than the stamp, or was made on this very stamp, one in the future
	-- included{{end}}) with its history: its attempts row's, else its retries
	-- at once's (state retried).{{if .Hist}} Materialized, so that the
	-- decision table is joined on all three of its keys.{{end}}
	SELECT a.tid, a.id::text AS sid, a.att, a.attempt AS read, a.again, a.node, a.err, a.upd, a.match,
	{{- if .Hist}}
		coalesce(a.state, CASE WHEN h.attempt IS NOT NULL THEN 'retried' END) AS read_state, coalesce({{.RetriesCounted}}, h.attempt) AS prev,
		CASE WHEN a.att IS NULL THEN coalesce(h.nodes, '{}') WHEN a.state = 'succeeded' THEN '{}' ELSE coalesce(a.nodes, '{}') END AS nodes,
		h.last_at, h.last_node
	-- An instance without an attempts row: its retries at once, read
	-- from the events through their index on instance, one probe per
	-- instance{{if .HistRange}} with one in the window (touched){{end}} (LATERAL: a probe, never a join of
	-- two CTEs, which a planner on stale statistics loops over, 10,000
	-- times 10,000 rows). They are all after the task's settle cursor
	-- (an instance's latest retry without a row is never before it) and
	-- before the newest event when this task's repair began (those after
	-- it are the run's own, of instances it picked before).
	FROM pick a LEFT JOIN LATERAL (SELECT h.* FROM (
	{{.CaseRetries}}) AS h WHERE a.att IS NULL{{if .HistRange}} AND a.id::text IN (SELECT w.instance FROM touched AS w){{end}}) AS h ON true
	{{- else}}
		a.state AS read_state, {{.RetriesCounted}} AS prev,
		CASE WHEN a.state = 'succeeded' THEN '{}' ELSE coalesce(a.nodes, '{}') END AS nodes,
		NULL::timestamptz AS last_at, NULL::text AS last_node
	FROM pick a
	{{- end}}
	WHERE {{.Decidable}} AND NOT a.locked
	{{- if .Failure}}
		AND (a.since IS NULL OR (a.since < a.upd AND a.stamp IS DISTINCT FROM a.upd))
	{{- end}}
), d AS {{if .Drawn}}MATERIALIZED{{else}}NOT MATERIALIZED{{end}} (
	-- Each instance decided: its row of the decision table, the attempt
	-- it makes, the delay of a scheduled retry, the reason said.
	-- Materialized when a delay is drawn (once per instance, random);
	-- otherwise computed as moved, and kept, read it (no copy: each
	-- instance goes one way).
	SELECT y.*,
		-- The table's reason as it is, but for a scheduled retry (its
		-- delay), an exhausted instance (the retries made, its nodes)
		-- and one run again while parked (by whom it was not).
		CASE WHEN y.plain AND NOT y.again THEN y.reason WHEN y.said IS NOT NULL AND NOT y.again THEN y.said ELSE
		-- The decision table stops at max_attempts: more retries
		-- made (max_attempts lowered since) are said as they are.
		CASE WHEN y.state = 'exhausted' AND y.prev > {{arg "max_attempts"}} THEN regexp_replace(y.reason, 'exhausted after [0-9]+ retr(y|ies)',
			'exhausted after ' || y.prev || ' retries') ELSE y.reason END
		-- waitSuffix (decide.go).
		|| CASE WHEN y.kind = 'wait' THEN ' in ' || {{.Seconds "y.delay_ms"}} || 's'
		        WHEN y.state = 'exhausted' AND cardinality(y.nodes) > 0 THEN {{.NodesSuffix}} || array_to_string(y.nodes, ', ')
		        ELSE '' END
		|| CASE WHEN NOT y.again THEN ''
		        WHEN y.read_state = 'waiting' THEN '; it was run again by someone else while retry ' || (y.read + 1) || ' waited (counted as made)'
		        ELSE '; it was run again by someone else while held' END END AS full_reason,
		-- Whether its attempts row is written: one it has is kept up to
		-- date; with Rowless, a first interruption retried at once gets
		-- none (its event holds its attempt: known reads it there), a
		-- second (the retries it read there: prev) gets its row, which
		-- takes the case over from the events.
		y.has_state{{if .Rowless}} AND (y.att IS NOT NULL OR y.not_retry OR y.prev IS NOT NULL){{end}} AS writes_row
	FROM (
		SELECT p.tid, p.sid, p.att, p.read, p.read_state, p.again, p.prev, p.node, p.err, p.upd, p.last_at, p.last_node, s.kind, s.to_state,
			s.st AS state, s.plain, s.has_state, s.not_retry, s.said, coalesce(p.prev, 0) + s.adds AS attempt, coalesce(p.prev, 0) + s.adds_made AS made,
			{{if .Waits}}CASE WHEN s.kind = 'wait' THEN {{.Sample}} END{{else}}NULL::float8{{end}} AS delay_ms,
			CASE WHEN p.node IS NULL OR p.node = ANY (p.nodes) THEN p.nodes ELSE p.nodes || p.node END AS nodes,
			s.reason
		FROM known p JOIN s ON s.k = p.match * ({{arg "max_attempts"}} + 2) + CASE WHEN p.prev IS NULL THEN 0 ELSE least(p.prev, {{arg "max_attempts"}}) + 1 END
	) AS y
), moved AS (
	-- The instances that move, re-asserting the pick's predicate: a
	-- row changed since is left alone.
	UPDATE {{.Table}} AS t SET {{.Status}} = r.to_state FROM d AS r
	WHERE t.ctid = r.tid AND r.to_state <> ''
	  AND t.{{.Status}} = {{arg "from"}} AND {{.Unclaimed "t"}}
	RETURNING r.sid, r.att, r.read, r.read_state, r.node, r.err, r.upd, r.kind, r.to_state, r.state, r.attempt, r.made, r.delay_ms, r.nodes, r.full_reason,
		r.writes_row, r.last_at, r.last_node
{{- if .Keeps}}
), kept AS (
	-- Those that stay where they are (parked), under the same predicate.
	SELECT r.sid, r.att, r.read, r.read_state, r.node, r.err, r.upd, r.kind, r.to_state, r.state, r.attempt, r.made, r.delay_ms, r.nodes, r.full_reason,
		r.writes_row, r.last_at, r.last_node
	FROM {{.Table}} AS t JOIN d AS r ON t.ctid = r.tid
	WHERE r.to_state = '' AND t.{{.Status}} = {{arg "from"}} AND {{.Unclaimed "t"}}
	FOR NO KEY UPDATE OF t
{{- end}}
), done AS NOT MATERIALIZED (
	-- Every instance decided, moved or kept (read where it is used:
	-- no copy).
	SELECT sid, att, read, read_state, node, err, upd, kind, to_state, state, attempt, made, delay_ms, nodes, full_reason AS reason, writes_row,
		last_at, last_node FROM moved
	{{- if .Keeps}}
	UNION ALL
	SELECT sid, att, read, read_state, node, err, upd, kind, to_state, state, attempt, made, delay_ms, nodes, full_reason, writes_row,
		last_at, last_node FROM kept
	{{- end}}
), w AS {{if .Keeps}}NOT {{end}}MATERIALIZED (
	-- The instances whose attempts rows are written or checked (for
	-- the default policy's retries at once, with Rowless, none: one read
	-- of the batch for both writes below; where instances are kept,
	-- most write one, and each write reads the batch itself, no copy).
	SELECT * FROM done WHERE writes_row OR att IS NOT NULL
), ins AS (
	-- A new attempts row where one is written and none exists (the
	-- primary key; a conflict fails the batch); after retries at once
	-- without one, their last time and node, as a row kept since would
	-- say.
	INSERT INTO {{.Attempts}} (workflow, instance, task, attempt, state, cause, left_in, last_attempt_at, next_attempt_at,
		last_node, nodes, last_reason, last_error, stamp)
	SELECT {{arg "workflow"}}, x.sid, {{arg "task"}}, x.made, x.state, {{.Cause}}, {{arg "from"}},
		CASE WHEN x.kind = 'retry' THEN now() ELSE x.last_at END,
		CASE WHEN x.kind = 'wait' THEN now() + x.delay_ms * interval '1 millisecond' END,
		coalesce(x.node, x.last_node), x.nodes, x.reason, x.err, x.upd
	FROM w x WHERE x.writes_row AND x.att IS NULL{{if not .Guard}} ON CONFLICT DO NOTHING{{end}}
	RETURNING 1
), upd AS (
	-- The row read by the pick, by tuple id: if it changed since, it
	-- is not found, and the counts below differ (the attempt-number
	-- guard).
	UPDATE {{.Attempts}} AS a SET attempt = x.made, state = x.state, cause = {{.Cause}}, left_in = {{arg "from"}}, since = now(),
		last_attempt_at = CASE WHEN x.kind = 'retry' THEN now() ELSE a.last_attempt_at END,
		next_attempt_at = CASE WHEN x.kind = 'wait' THEN now() + x.delay_ms * interval '1 millisecond' END,
		last_node = coalesce(x.node, a.last_node), nodes = x.nodes, last_reason = x.reason, last_error = x.err,
		stamp = coalesce(x.upd, a.stamp)
	FROM w x
	WHERE x.att IS NOT NULL AND {{if .Guard}}a.ctid = x.att AND a.attempt = x.read AND a.state = x.read_state{{else}}a.workflow = {{arg "workflow"}} AND a.instance = x.sid AND a.task = {{arg "task"}}{{end}}
	RETURNING 1
), ev AS (
	-- One event per instance.
	{{- if .NoEvents}}
	SELECT 1
	{{- else}}
	INSERT INTO {{.Events}} (kind, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason)
	SELECT CASE x.kind WHEN 'wait' THEN {{.KindWait}} WHEN 'hold' THEN {{.KindHold}} WHEN 'retry' THEN {{.KindRetry}} ELSE {{.KindFail}} END,
		{{arg "run"}}, x.node, {{arg "workflow"}}, x.sid, {{arg "task"}}, {{arg "from"}}, nullif(x.to_state, ''),
		CASE WHEN x.state <> '' THEN x.attempt END, x.reason
	FROM done x
	{{- if .Start}}
	RETURNING id
	{{- end}}
	{{- end}}
){{if .Start}}, started AS (
	-- The task's settle cursor (settle_events reads its retries at once
	-- after it), just before this batch's events, when it has none yet
	-- and the batch wrote a retry at once without a row (of two first
	-- batches at once, the lower start stays).
	INSERT INTO {{.Cursors}} AS c (workflow, task, after_id)
	SELECT {{arg "workflow"}}, {{arg "task"}}, min(ev.id) - 1 FROM ev
	WHERE NOT EXISTS (SELECT 1 FROM {{.Cursors}} AS k WHERE k.workflow = {{arg "workflow"}} AND k.task = {{arg "task"}})
	  AND EXISTS (SELECT 1 FROM done x WHERE x.kind = 'retry' AND NOT x.writes_row)
	HAVING count(*) > 0
	ON CONFLICT (workflow, task) DO UPDATE SET after_id = least(c.after_id, EXCLUDED.after_id)
	RETURNING 1
){{end}}{{if .Interruptions}}, intr AS (
	-- Interruptions of the nodes whose claims this run expired, for
	-- their failover grades.
	INSERT INTO {{.Interruptions}} (run_id, node, workflow, task, instance)
	SELECT {{arg "run"}}, x.node, {{arg "workflow"}}, {{arg "task"}}, x.sid FROM done x WHERE x.node IS NOT NULL AND x.sid = ANY ({{arg "expired"}}::text[])
){{end}}, tally AS (
	-- The batch counted, in one read of it.
	SELECT count(*) AS done, count(*) FILTER (WHERE kind = 'retry') AS retried, count(*) FILTER (WHERE kind = 'wait') AS waiting,
		count(*) FILTER (WHERE kind = 'hold') AS held, count(*) FILTER (WHERE kind = 'fail') AS failed,
		count(*) FILTER (WHERE state = 'exhausted') AS exhausted, count(*) FILTER (WHERE writes_row) AS writes,
		{{if .Debug}}json_agg(json_build_object('instance', sid, 'kind', kind, 'to', to_state, 'node', coalesce(node, ''),
			'attempt', CASE WHEN state <> '' THEN attempt ELSE 0 END, 'reason', reason) ORDER BY sid){{else}}NULL::json{{end}} AS each
	FROM done
), counted AS (
	-- Done, and planned at least as many: instances that entered the
	-- state after the task's count, beyond the cursor, are repaired too.
	UPDATE {{.Runs}} SET done = done + (SELECT t.done FROM tally t), planned = greatest(planned, done + (SELECT t.done FROM tally t))
	WHERE id = {{arg "run"}}
)
SELECT t.retried, t.waiting, t.held, t.failed, t.exhausted, t.writes, (SELECT count(*) FROM ins) + (SELECT count(*) FROM upd),
	p.picked,
	-- Of those picked, the ones decided: those of them not done were
	-- changed between the pick and the write (the protocol doctor's late
	-- writes).
	p.decidable,
	-- The cursor of the next batch.
	{{- if .Failure}}
	-- (ORDER BY, not max: an id of a type without max, uuid, has an
	-- order.)
	coalesce((SELECT p.id::text FROM pick p ORDER BY p.upd DESC, p.id DESC LIMIT 1), ''), coalesce(p.upd::text, ''),
	{{- else if .MaxID}}
	-- (The greatest id picked, read in the pass that counts the pick:
	-- the ids' type has a max.)
	coalesce(p.last::text, ''), '',
	{{- else}}
	-- (ORDER BY, not max: an id of a type without max, uuid, has an
	-- order.)
	coalesce((SELECT p.id::text FROM pick p ORDER BY p.id DESC LIMIT 1), ''), '',
	{{- end}}
	t.each,
	-- Whether the task has a settle cursor now (this batch wrote it, or
	-- another's had): the task's next batches need not write one.
	{{if .Start}}EXISTS (SELECT 1 FROM started) OR EXISTS (SELECT 1 FROM {{.Cursors}} AS k WHERE k.workflow = {{arg "workflow"}} AND k.task = {{arg "task"}}){{else}}false{{end}}
FROM tally t, (SELECT count(*) AS picked, count(*) FILTER (WHERE {{.Decidable}} AND NOT a.locked
	{{- if .Failure}} AND (a.since IS NULL OR (a.since < a.upd AND a.stamp IS DISTINCT FROM a.upd)){{end}}) AS decidable,
	max(a.upd) AS upd{{if .MaxID}}, max(a.id) AS last{{end}} FROM pick a) AS p
