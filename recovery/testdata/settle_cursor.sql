-- settle_cursor
-- $1 workflows
-- $2 tasks
SELECT c.workflow, c.task, c.after_id, (SELECT coalesce(max(e.id), 0) FROM "enginehealth".events AS e) AS upto
FROM "enginehealth".settle_cursors AS c
WHERE (c.workflow, c.task) IN (SELECT * FROM unnest($1::text[], $2::text[]))
