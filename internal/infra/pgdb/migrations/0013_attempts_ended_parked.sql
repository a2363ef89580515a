-- A parked row (a retry waiting, a hold open) whose instance reached one
-- of the task's end states without it is closed as succeeded (the case
-- ended: a later one counts from 0), but nothing of it ran: its retry or
-- hold was cancelled. ended_parked marks such succeeded rows, so that
-- retry statistics count them as cancelled, not as retries that ran and
-- succeeded. Read only with state 'succeeded'; every step that closes a
-- row as succeeded sets it.
ALTER TABLE attempts ADD COLUMN ended_parked boolean NOT NULL DEFAULT false;
-- Rows closed so before: their reason says so (moveParked, settleParked).
UPDATE attempts SET ended_parked = true
WHERE state = 'succeeded' AND last_reason LIKE '% cancelled: the instance reached end state %';
