-- end_run
-- $1 status
-- $2 error
-- $3 run
UPDATE "enginehealth".runs SET status = $1, error = $2, finished_at = now() WHERE id = $3
