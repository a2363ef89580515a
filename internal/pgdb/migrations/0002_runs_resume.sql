-- Runs cut short by a master change are closed as interrupted and resumed
-- by a new run that points at them.
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('running', 'finished', 'failed', 'interrupted'));
ALTER TABLE runs ADD COLUMN resumed_from bigint REFERENCES runs (id);
ALTER TABLE runs ADD COLUMN kind text NOT NULL DEFAULT 'recovery'
    CHECK (kind IN ('recovery', 'check'));

-- Repair events name the node whose claim on the instance expired: found
-- through the instance's last claim_expired event.
CREATE INDEX events_claim_expired_idx ON events (workflow, instance, id)
    WHERE kind = 'claim_expired';

-- Repairs write one event per instance; a foreign-key check per event row
-- cost a third of the insert. The run id is written by the same transaction
-- that updates the run, so it needs no check.
ALTER TABLE events DROP CONSTRAINT events_run_id_fkey;

-- Events are read by id (which follows time) and by run; a B-tree on each
-- cost every repair two index inserts per event. Runs are written in id
-- order, so a BRIN index finds them for almost nothing.
DROP INDEX events_at_idx;
DROP INDEX events_run_idx;
CREATE INDEX events_run_brin ON events USING brin (run_id);
