-- insert_retry
-- $1 workflow
-- $2 instance
-- $3 task
-- $4 cause
-- $5 left_in
-- $6 reason
INSERT INTO "enginehealth".attempts (workflow, instance, task, attempt, manual, state, cause, left_in, last_attempt_at, last_reason)
VALUES ($1, $2, $3, 0, 1, 'retried', $4, $5, now(), $6)
