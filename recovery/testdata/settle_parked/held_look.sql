-- settle_parked: the first look at a task's holds
-- $1 workflow
-- $2 task
-- $3 limit
-- $4 ends
-- $5 what
WITH h AS MATERIALIZED (
	-- The slice, in the order of the state's partial index (the state
	-- a literal, so that the planner reads it).
	SELECT a.ctid AS tid, a.instance, a.attempt, a.left_in, a.since AS at FROM "enginehealth"."attempts" AS a
	WHERE a.workflow = $1 AND a.state = 'held' AND a.task = $2
	-- No row locks: most rows looked at stay as they are; the
	-- update takes those it changes, by tuple id and state (a
	-- row changed since is not found).
	ORDER BY a.since, a.instance LIMIT $3
), x AS MATERIALIZED (
	-- Those whose instance is no longer where it was left: a hold's
	-- instance moved anywhere or is gone.
	SELECT j.*, j.st = ANY ($4::text[]) AS ended, CASE
			WHEN j.st IS NULL THEN $5 || ': the instance no longer exists'
			WHEN j.st = ANY ($4::text[]) THEN $5 || ': the instance reached end state ' || j.st
			ELSE $5 || ': instance moved to ' || j.st || ' by someone else' END AS reason
	FROM (SELECT h.*, (SELECT t."status"::text FROM "app"."invoices" AS t WHERE t."id" = h.instance::bigint) AS st FROM h) AS j
	WHERE j.st IS DISTINCT FROM j.left_in
)
-- The rows looked at, the last one (the next slice's start) and those
-- to close.
SELECT (SELECT count(*) FROM h), coalesce((SELECT at::text FROM h ORDER BY at DESC, instance DESC LIMIT 1), ''),
	coalesce((SELECT instance FROM h ORDER BY at DESC, instance DESC LIMIT 1), ''), (SELECT count(*) FROM x)
