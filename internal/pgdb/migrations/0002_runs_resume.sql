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
