-- read_marks
-- $1 stale_ms
SELECT workflow, task, mark::text AS mark,
	mark < now() - $1 * interval '1 millisecond' AS stale FROM "enginehealth".failure_marks
