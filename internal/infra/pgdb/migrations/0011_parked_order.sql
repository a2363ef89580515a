-- The check looks at parked rows in turn, a bounded slice a pass, in the
-- order of these indexes: the instance breaks ties of time (rows parked
-- by one batch share it), so a slice is a range of the index, never a
-- sort of every parked row.
DROP INDEX attempts_due_idx;
CREATE INDEX attempts_due_idx ON attempts (next_attempt_at, instance) WHERE state = 'waiting';
DROP INDEX attempts_held_idx;
CREATE INDEX attempts_held_idx ON attempts (workflow, since, instance) WHERE state = 'held';
