-- move_mark
-- $1 lag_ms
-- $2 workflow
-- $3 task
UPDATE "enginehealth".failure_marks SET mark = greatest(mark, now() - $1 * interval '1 millisecond')
WHERE workflow = $2 AND task = $3
