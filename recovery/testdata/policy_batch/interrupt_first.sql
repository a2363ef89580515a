-- policy_batch: the first batch of a claimable task's interruptions, with non-retryable patterns, in a fleet that counts retries at once from their events, the task's first (no settle cursor yet: it writes it)
--
-- The decision table (known … hi; max_attempts 3, cap 60000 ms, jitter 0.2): history known, retries made, pattern matched → kind, to_state, attempts row state, delay interval (ms, before the cap and the jitter), reason
--   false  0 0 → wait  ""           "waiting"   1000–1000   interrupted: retry 1 of 3
--   true   0 0 → wait  ""           "waiting"   1000–1000   interrupted: retry 1 of 3
--   true   1 0 → wait  ""           "waiting"   2000–2000   interrupted: retry 2 of 3
--   true   2 0 → wait  ""           "waiting"   4000–4000   interrupted: retry 3 of 3
--   true   3 0 → fail  "SendFailed" "exhausted" —           interrupted: exhausted after 3 retries
--   false  0 1 → fail  "SendFailed" "failed"    —           error matches non_retryable "^card declined": failed at once
--   true   0 1 → fail  "SendFailed" "failed"    —           error matches non_retryable "^card declined": failed at once
--   true   1 1 → fail  "SendFailed" "failed"    —           error matches non_retryable "^card declined": failed at once
--   true   2 1 → fail  "SendFailed" "failed"    —           error matches non_retryable "^card declined": failed at once
--   true   3 1 → fail  "SendFailed" "failed"    —           error matches non_retryable "^card declined": failed at once
--   false  0 2 → fail  "SendFailed" "failed"    —           error matches non_retryable "\\bfatal\\b": failed at once
--   true   0 2 → fail  "SendFailed" "failed"    —           error matches non_retryable "\\bfatal\\b": failed at once
--   true   1 2 → fail  "SendFailed" "failed"    —           error matches non_retryable "\\bfatal\\b": failed at once
--   true   2 2 → fail  "SendFailed" "failed"    —           error matches non_retryable "\\bfatal\\b": failed at once
--   true   3 2 → fail  "SendFailed" "failed"    —           error matches non_retryable "\\bfatal\\b": failed at once
-- $1 max_attempts
-- $2 cap_ms
-- $3 jitter
-- $4 known
-- $5 prev
-- $6 match
-- $7 kind
-- $8 to_state
-- $9 state
-- $10 reason
-- $11 lo
-- $12 hi
-- $13 workflow
-- $14 from
-- $15 patterns
-- $16 batch_size
-- $17 task
-- $18 run
WITH s AS MATERIALIZED (
	-- The decision table: one row per (attempts row known, retries
	-- made, pattern matched); k numbers the three (decided, below, is
	-- joined on k alone, so that the planner counts one row of the table
	-- per instance). What a row decides beyond its columns is worked
	-- out here, once per row of the table, not once per instance.
	SELECT s.*, s.match * ($1 + 2) + CASE WHEN s.known THEN s.prev + 1 ELSE 0 END AS k,
		CASE WHEN s.state = '' AND s.known THEN 'failed' ELSE s.state END AS st,
		CASE WHEN s.kind IN ('retry', 'wait') THEN 1 ELSE 0 END AS adds, CASE WHEN s.kind = 'retry' THEN 1 ELSE 0 END AS adds_made,
		s.kind <> 'wait' AND s.state <> 'exhausted' AS plain, s.state <> '' OR s.known AS has_state, s.kind <> 'retry' AS not_retry,
		NULL::text AS said
	FROM (SELECT u.*, $2::float8 AS cap, $3::float8 AS jitter
		FROM unnest($4::bool[], $5::int[], $6::int[], $7::text[], $8::text[],
			$9::text[], $10::text[], $11::float8[], $12::float8[])
			AS u(known, prev, match, kind, to_state, state, reason, lo, hi)) AS s
), pick AS MATERIALIZED (
	-- Up to batch_size instances in the state, unclaimed, after the
	-- cursor (the batch's keyset: the next batch starts after its last),
	-- with their attempts rows, if any. again: a parked row's instance
	-- ran again since it was parked. locked (SkipLocked): its attempts
	-- row is locked by another transaction: the instance is left for
	-- the next pass, as a locked instance row is.
	SELECT p.*, a.att, a.attempt, a.state, a.nodes, a.since, a.stamp,
		CASE WHEN a.state IN ('waiting', 'held') THEN EXISTS (SELECT 1 FROM "enginehealth"."events" e WHERE e.kind = 'claim_expired' AND e.workflow = $13 AND e.instance = a.instance AND e.from_state = $14 AND e.at > a.since) ELSE false END AS again,
		false AS locked
	FROM (
		SELECT b.ctid AS tid, b."id" AS id,
			NULL::text AS node,
			coalesce((SELECT u.i FROM unnest($15::text[]) WITH ORDINALITY AS u(p, i)
				WHERE b."last_error"::text ~ u.p ORDER BY u.i LIMIT 1), 0) AS match,
			left(b."last_error"::text, 2000) AS err,
			NULL::timestamptz AS upd
		FROM "app"."invoices" AS b
		WHERE b."status" = $14 AND NOT EXISTS (SELECT 1 FROM "app"."invoice_claim" c WHERE c."instance_id" = b."id")
		ORDER BY b."id" LIMIT $16
	) AS p LEFT JOIN LATERAL (
		-- LIMIT 1 keeps this a probe of the primary key per instance,
		-- whatever the planner thinks of the table's size (a hash of
		-- the task's rows, on statistics older than a run that parks
		-- thousands, read them all for every batch).
		SELECT a.ctid AS att, a.instance, a.attempt, a.state, a.nodes, a.since, a.stamp FROM "enginehealth"."attempts" AS a
		WHERE a.workflow = $13 AND a.instance = p.id::text AND a.task = $17 LIMIT 1) AS a ON true
), known AS (
	-- Each instance to decide (not parked, or run again since) with its history: its attempts row's, else its retries
	-- at once's (state retried).
	SELECT a.tid, a.id::text AS sid, a.att, a.attempt AS read, a.again, a.node, a.err, a.upd, a.match,
		a.state AS read_state, CASE WHEN a.state = 'succeeded' THEN 0 WHEN a.again AND a.state = 'waiting' THEN a.attempt + 1 ELSE a.attempt END AS prev,
		CASE WHEN a.state = 'succeeded' THEN '{}' ELSE coalesce(a.nodes, '{}') END AS nodes,
		NULL::timestamptz AS last_at, NULL::text AS last_node
	FROM pick a
	WHERE (a.state IS NULL OR a.state NOT IN ('waiting', 'held') OR a.again) AND NOT a.locked
), d AS MATERIALIZED (
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
		CASE WHEN y.state = 'exhausted' AND y.prev > $1 THEN regexp_replace(y.reason, 'exhausted after [0-9]+ retr(y|ies)',
			'exhausted after ' || y.prev || ' retries') ELSE y.reason END
		-- waitSuffix (decide.go).
		|| CASE WHEN y.kind = 'wait' THEN ' in ' || (floor((y.delay_ms) + 0.5)::bigint / 1000) || '.' || lpad((floor((y.delay_ms) + 0.5)::bigint % 1000)::text, 3, '0') || 's'
		        WHEN y.state = 'exhausted' AND cardinality(y.nodes) > 0 THEN '; interrupted on ' || array_to_string(y.nodes, ', ')
		        ELSE '' END
		|| CASE WHEN NOT y.again THEN ''
		        WHEN y.read_state = 'waiting' THEN '; it was run again by someone else while retry ' || (y.read + 1) || ' waited (counted as made)'
		        ELSE '; it was run again by someone else while held' END END AS full_reason,
		-- Whether its attempts row is written: one it has is kept up to
		-- date; with Rowless, a first interruption retried at once gets
		-- none (its event holds its attempt: known reads it there), a
		-- second (the retries it read there: prev) gets its row, which
		-- takes the case over from the events.
		y.has_state AND (y.att IS NOT NULL OR y.not_retry OR y.prev IS NOT NULL) AS writes_row
	FROM (
		SELECT p.tid, p.sid, p.att, p.read, p.read_state, p.again, p.prev, p.node, p.err, p.upd, p.last_at, p.last_node, s.kind, s.to_state,
			s.st AS state, s.plain, s.has_state, s.not_retry, s.said, coalesce(p.prev, 0) + s.adds AS attempt, coalesce(p.prev, 0) + s.adds_made AS made,
			CASE WHEN s.kind = 'wait' THEN least(s.cap, greatest(0, least(s.cap, s.lo + random() * (s.hi - s.lo)) * (1 + s.jitter * (2 * random() - 1)))) END AS delay_ms,
			CASE WHEN p.node IS NULL OR p.node = ANY (p.nodes) THEN p.nodes ELSE p.nodes || p.node END AS nodes,
			s.reason
		FROM known p JOIN s ON s.k = p.match * ($1 + 2) + CASE WHEN p.prev IS NULL THEN 0 ELSE least(p.prev, $1) + 1 END
	) AS y
), moved AS (
	-- The instances that move, re-asserting the pick's predicate: a
	-- row changed since is left alone.
	UPDATE "app"."invoices" AS t SET "status" = r.to_state FROM d AS r
	WHERE t.ctid = r.tid AND r.to_state <> ''
	  AND t."status" = $14 AND NOT EXISTS (SELECT 1 FROM "app"."invoice_claim" c WHERE c."instance_id" = t."id")
	RETURNING r.sid, r.att, r.read, r.read_state, r.node, r.err, r.upd, r.kind, r.to_state, r.state, r.attempt, r.made, r.delay_ms, r.nodes, r.full_reason,
		r.writes_row, r.last_at, r.last_node
), kept AS (
	-- Those that stay where they are (parked), under the same predicate.
	SELECT r.sid, r.att, r.read, r.read_state, r.node, r.err, r.upd, r.kind, r.to_state, r.state, r.attempt, r.made, r.delay_ms, r.nodes, r.full_reason,
		r.writes_row, r.last_at, r.last_node
	FROM "app"."invoices" AS t JOIN d AS r ON t.ctid = r.tid
	WHERE r.to_state = '' AND t."status" = $14 AND NOT EXISTS (SELECT 1 FROM "app"."invoice_claim" c WHERE c."instance_id" = t."id")
	FOR NO KEY UPDATE OF t
), done AS NOT MATERIALIZED (
	-- Every instance decided, moved or kept (read where it is used:
	-- no copy).
	SELECT sid, att, read, read_state, node, err, upd, kind, to_state, state, attempt, made, delay_ms, nodes, full_reason AS reason, writes_row,
		last_at, last_node FROM moved
	UNION ALL
	SELECT sid, att, read, read_state, node, err, upd, kind, to_state, state, attempt, made, delay_ms, nodes, full_reason, writes_row,
		last_at, last_node FROM kept
), w AS NOT MATERIALIZED (
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
	INSERT INTO "enginehealth"."attempts" (workflow, instance, task, attempt, state, cause, left_in, last_attempt_at, next_attempt_at,
		last_node, nodes, last_reason, last_error, stamp)
	SELECT $13, x.sid, $17, x.made, x.state, 'interrupt', $14,
		CASE WHEN x.kind = 'retry' THEN now() ELSE x.last_at END,
		CASE WHEN x.kind = 'wait' THEN now() + x.delay_ms * interval '1 millisecond' END,
		coalesce(x.node, x.last_node), x.nodes, x.reason, x.err, x.upd
	FROM w x WHERE x.writes_row AND x.att IS NULL
	RETURNING 1
), upd AS (
	-- The row read by the pick, by tuple id: if it changed since, it
	-- is not found, and the counts below differ (the attempt-number
	-- guard).
	UPDATE "enginehealth"."attempts" AS a SET attempt = x.made, state = x.state, cause = 'interrupt', left_in = $14, since = now(),
		last_attempt_at = CASE WHEN x.kind = 'retry' THEN now() ELSE a.last_attempt_at END,
		next_attempt_at = CASE WHEN x.kind = 'wait' THEN now() + x.delay_ms * interval '1 millisecond' END,
		last_node = coalesce(x.node, a.last_node), nodes = x.nodes, last_reason = x.reason, last_error = x.err,
		stamp = coalesce(x.upd, a.stamp)
	FROM w x
	WHERE x.att IS NOT NULL AND a.ctid = x.att AND a.attempt = x.read AND a.state = x.read_state
	RETURNING 1
), ev AS (
	-- One event per instance.
	INSERT INTO "enginehealth"."events" (kind, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason)
	SELECT CASE x.kind WHEN 'wait' THEN 'retry_scheduled' WHEN 'hold' THEN 'instance_held' WHEN 'retry' THEN 'instance_repaired' ELSE 'instance_repaired' END,
		$18, x.node, $13, x.sid, $17, $14, nullif(x.to_state, ''),
		CASE WHEN x.state <> '' THEN x.attempt END, x.reason
	FROM done x
), tally AS (
	-- The batch counted, in one read of it.
	SELECT count(*) AS done, count(*) FILTER (WHERE kind = 'retry') AS retried, count(*) FILTER (WHERE kind = 'wait') AS waiting,
		count(*) FILTER (WHERE kind = 'hold') AS held, count(*) FILTER (WHERE kind = 'fail') AS failed,
		count(*) FILTER (WHERE state = 'exhausted') AS exhausted, count(*) FILTER (WHERE writes_row) AS writes,
		NULL::json AS each
	FROM done
), counted AS (
	-- Done, and planned at least as many: instances that entered the
	-- state after the task's count, beyond the cursor, are repaired too.
	UPDATE "enginehealth"."runs" SET done = done + (SELECT t.done FROM tally t), planned = greatest(planned, done + (SELECT t.done FROM tally t))
	WHERE id = $18
)
SELECT t.retried, t.waiting, t.held, t.failed, t.exhausted, t.writes, (SELECT count(*) FROM ins) + (SELECT count(*) FROM upd),
	p.picked,
	-- Of those picked, the ones decided: those of them not done were
	-- changed between the pick and the write (the protocol doctor's late
	-- writes).
	p.decidable,
	-- The cursor of the next batch.
	-- (ORDER BY, not max: an id of a type without max, uuid, has an
	-- order.)
	coalesce((SELECT p.id::text FROM pick p ORDER BY p.id DESC LIMIT 1), ''), '',
	t.each,
	-- Whether the task has a settle cursor now (this batch wrote it, or
	-- another's had): the task's next batches need not write one.
	false
FROM tally t, (SELECT count(*) AS picked, count(*) FILTER (WHERE (a.state IS NULL OR a.state NOT IN ('waiting', 'held') OR a.again) AND NOT a.locked) AS decidable,
	max(a.upd) AS upd FROM pick a) AS p
