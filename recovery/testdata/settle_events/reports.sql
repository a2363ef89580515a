-- settle_events: a later batch of a task without claims or an on_failure policy
-- $1 after
-- $2 upto
-- $3 workflow
-- $4 task
-- $5 batch_size
-- $6 ends
-- $7 begin
-- $8 interim
-- $9 failed
-- $10 horizon_ms
-- $11 run
WITH r AS MATERIALIZED (
	-- Up to batch_size retries at once of the task after the cursor (or
	-- the open cases given), in the order written (the events' primary
	-- key).
	SELECT e.id, e.instance, e.at, e.from_state FROM "enginehealth"."events" AS e
	WHERE e.id > $1 AND e.id <= $2
	  AND e.kind = 'instance_repaired' AND e.attempt IS NOT NULL
	  AND e.workflow = $3 AND e.task = $4
	ORDER BY e.id LIMIT $5
), o AS MATERIALIZED (
	-- The cases still the event's: no attempts row, no later retry at
	-- once of the instance (a probe each: the primary key, the index on
	-- instance), with the instance's state now (NULL: the row is gone).
	SELECT r.*, (SELECT t."state"::text FROM "app"."reports" AS t WHERE t."id" = r.instance::bigint) AS st
	FROM r
	LEFT JOIN LATERAL (SELECT 1 AS found FROM "enginehealth"."attempts" AS a
		WHERE a.workflow = $3 AND a.instance = r.instance AND a.task = $4 LIMIT 1) AS kept ON true
	LEFT JOIN LATERAL (SELECT 1 AS found FROM "enginehealth"."events" AS l
		WHERE l.instance = r.instance AND l.workflow = $3 AND l.task = $4 AND l.id > r.id
		  AND l.kind = 'instance_repaired' AND l.attempt IS NOT NULL LIMIT 1) AS later ON true
	WHERE kept.found IS NULL AND later.found IS NULL
), x AS NOT MATERIALIZED (
	-- The outcome: '' while the retry still runs (begin, interim),
	-- and, under an on_failure policy, when the engine failed it (the
	-- policy decides it). Worked out where it is read (no copy).
	SELECT o.*, CASE
			WHEN st IS NULL THEN 'cancelled'
			WHEN st = ANY ($6::text[]) THEN 'succeeded'
			WHEN st = $7 OR st = $8 THEN ''
			WHEN st = $9 THEN 'failed'
			ELSE 'succeeded' END AS next FROM o
), y AS MATERIALIZED (
	-- Closed now, or still running past the horizon, with the case's
	-- retries and nodes (read for these only: a pass after a mass
	-- interruption finds most cases still running, each pass) and the
	-- reason said.
	SELECT h.*, CASE next
			WHEN 'cancelled' THEN what || ' cancelled: the instance no longer exists'
			WHEN 'failed' THEN what || ' failed: the engine moved the instance to ' || st
			WHEN 'succeeded' THEN CASE WHEN st = ANY ($6::text[])
				THEN what || ' succeeded: the instance reached ' || st
				ELSE what || ' succeeded: the instance went on to ' || st END
			ELSE what || ' still runs (in ' || st || '): followed in this row'
		END AS reason
	FROM (SELECT o.*, a.attempt, a.nodes, a.last_node, 'retry ' || a.attempt AS what
		FROM x AS o LEFT JOIN LATERAL (
		-- LIMIT 1 keeps this a probe of the primary key per row,
		-- whatever the planner thinks of the table's size.
		(SELECT a.ctid AS tid, a.attempt, a.nodes, a.state, a.since, a.stamp,
			CASE WHEN a.state IN ('waiting', 'held') THEN false ELSE false END AS again, a.last_attempt_at AS last_at, a.last_node
		FROM "enginehealth"."attempts" AS a
		WHERE a.workflow = $3 AND a.instance = o.instance AND a.task = $4 LIMIT 1)
		UNION ALL
		(SELECT NULL::tid, h.attempt, h.nodes, 'retried', NULL::timestamptz, NULL::timestamptz, false, h.last_at, h.last_node FROM (
		SELECT e.instance, max(e.attempt) AS attempt, coalesce((SELECT array_agg(u.n ORDER BY u.i) FROM (
			SELECT DISTINCT ON (v.n) v.n, v.i FROM unnest(array_agg(e.node ORDER BY e.id) FILTER (WHERE e.node IS NOT NULL))
				WITH ORDINALITY AS v(n, i) ORDER BY v.n, v.i) AS u), '{}') AS nodes,
		max(e.at) AS last_at, (array_agg(e.node ORDER BY e.id DESC) FILTER (WHERE e.node IS NOT NULL))[1] AS last_node
		FROM "enginehealth"."events" AS e
		WHERE e.instance = o.instance AND e.workflow = $3 AND e.task = $4
		  AND e.kind = 'instance_repaired' AND e.attempt IS NOT NULL
		GROUP BY e.instance) AS h)
		LIMIT 1) AS a ON true
		WHERE o.next <> '' OR o.at < now() - $10 * interval '1 millisecond') AS h
), rows_written AS (
	-- Its attempts row: the case's outcome, or still retried since the
	-- retry was made (since: the failure path decides a failure stamped
	-- after it).
	INSERT INTO "enginehealth"."attempts" (workflow, instance, task, attempt, state, cause, left_in, since, last_attempt_at, last_node, nodes, last_reason)
	SELECT $3, y.instance, $4, y.attempt, CASE WHEN y.next = '' THEN 'retried' ELSE y.next END, 'interrupt',
		y.from_state, CASE WHEN y.next = '' THEN y.at ELSE now() END, y.at, y.last_node, y.nodes, y.reason
	FROM y
	ON CONFLICT DO NOTHING
	RETURNING 1
), ev AS (
	-- One event per case closed.
	INSERT INTO "enginehealth"."events" (kind, run_id, workflow, instance, task, to_state, attempt, reason)
	SELECT CASE y.next WHEN 'succeeded' THEN 'retry_succeeded' WHEN 'failed' THEN 'retry_failed' ELSE 'retry_cancelled' END,
		$11, $3, y.instance, $4, y.st, y.attempt, y.reason
	FROM y WHERE y.next <> ''
)
-- The events looked at, the last one (the next batch's start), the
-- cases left open, in order (the cursor stops before the first; the
-- next pass reads them again), the outcomes, the rows to write and
-- those written (an operator's row written meanwhile: the batch fails,
-- the next pass sees the row).
SELECT (SELECT count(*) FROM r), coalesce((SELECT max(id) FROM r), $1),
	(SELECT array_agg(x.id ORDER BY x.id) FROM x WHERE x.next = '' AND x.at >= now() - $10 * interval '1 millisecond'),
	(SELECT count(*) FROM y WHERE next = 'succeeded'), (SELECT count(*) FROM y WHERE next = 'failed'),
	(SELECT count(*) FROM y WHERE next = 'cancelled'), (SELECT count(*) FROM y), (SELECT count(*) FROM rows_written)
