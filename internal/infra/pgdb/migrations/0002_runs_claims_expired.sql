-- Runs count expired claims apart from instances: planned and done are
-- instances only.
ALTER TABLE runs ADD COLUMN claims_expired bigint NOT NULL DEFAULT 0;
