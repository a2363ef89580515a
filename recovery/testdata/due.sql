-- due
-- $1 workflows
-- $2 tasks
-- $3 limit
SELECT workflow, instance, task, attempt, left_in, cause FROM "enginehealth".attempts
WHERE state = 'waiting' AND next_attempt_at <= now()
  AND (workflow, task) IN (SELECT * FROM unnest($1::text[], $2::text[]))
ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED
