-- insert_mark
-- $1 workflow
-- $2 task
INSERT INTO "enginehealth".failure_marks (workflow, task, mark) VALUES ($1, $2, now())
ON CONFLICT DO NOTHING
