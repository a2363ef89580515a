{{/*
due: locks a batch of the waiting retries whose time has come, of the
configured workflows and tasks, soonest due first, skipping rows another
transaction holds (Repairer.Due, attempts.go, in its fenced
transaction): the partial index on next_attempt_at makes a pass with
none due one index probe.

Parameters (numbered $1, $2, … in the order they first appear):
  workflows, tasks  the configured tasks, as two arrays of one length
  limit             rows per batch
*/ -}}
SELECT workflow, instance, task, attempt, left_in, cause FROM {{.Attempts}}
WHERE state = 'waiting' AND next_attempt_at <= now()
  AND (workflow, task) IN (SELECT * FROM unnest({{arg "workflows"}}::text[], {{arg "tasks"}}::text[]))
ORDER BY next_attempt_at LIMIT {{arg "limit"}} FOR UPDATE SKIP LOCKED
