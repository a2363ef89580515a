-- drop_marks
-- $1 workflows
-- $2 tasks
DELETE FROM "enginehealth".failure_marks
WHERE (workflow, task) IN (SELECT * FROM unnest($1::text[], $2::text[]))
