-- settle_parked: a sweep's look at a task's waiting retries after the slice before
-- $1 workflow
-- $2 task
-- $3 cursor_at
-- $4 cursor_instance
-- $5 limit
-- $6 ends
-- $7 what
WITH h AS MATERIALIZED (
	-- The slice, in the order of the state's partial index (the state
	-- a literal, so that the planner reads it).
	SELECT a.ctid AS tid, a.instance, a.attempt, a.left_in, a.next_attempt_at AS at FROM "enginehealth"."attempts" AS a
	WHERE a.workflow = $1 AND a.state = 'waiting' AND a.task = $2 AND (a.next_attempt_at, a.instance) > ($3::timestamptz, $4::text)
	-- No row locks: most rows looked at stay as they are; the
	-- update takes those it changes, by tuple id and state (a
	-- row changed since is not found).
	ORDER BY a.next_attempt_at, a.instance LIMIT $5
), x AS MATERIALIZED (
	-- Those whose instance is no longer where it was left: a waiting
	-- retry's instance reached an end state or is gone.
	SELECT j.*, j.st = ANY ($6::text[]) AS ended, CASE
			WHEN j.st IS NULL THEN $7 || ': the instance no longer exists'
			WHEN j.st = ANY ($6::text[]) THEN $7 || ': the instance reached end state ' || j.st
			ELSE $7 || ': instance moved to ' || j.st || ' by someone else' END AS reason
	FROM (SELECT h.*, (SELECT t."state"::text FROM "app"."reports" AS t WHERE t."id" = h.instance::bigint) AS st FROM h) AS j
	WHERE j.st IS NULL OR j.st = ANY ($6::text[])
)
-- The rows looked at, the last one (the next slice's start) and those
-- to close.
SELECT (SELECT count(*) FROM h), coalesce((SELECT at::text FROM h ORDER BY at DESC, instance DESC LIMIT 1), ''),
	coalesce((SELECT instance FROM h ORDER BY at DESC, instance DESC LIMIT 1), ''), (SELECT count(*) FROM x)
