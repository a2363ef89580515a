-- The protocol doctor: what the master sees engines do against the claim
-- protocol (docs/claim-protocol.md), one row per finding. A finding that
-- lasts (a claim by a node with no record, a claim on an instance out of
-- its interim state, a claim a Not responding node took or renewed) is
-- the claim's, by its token, and recorded once; one found by a run (an
-- instance interim without a claim, a repair lost to a late write) is
-- the run's. Rows older than a week are deleted by the doctor.
CREATE TABLE protocol_violations (
    id       bigserial PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    kind     text NOT NULL CHECK (kind IN ('claim_without_node', 'claim_not_interim', 'interim_without_claim',
                                           'claim_by_not_responding', 'late_write')),
    workflow text NOT NULL,
    -- The node the finding is about ('' when unknown: who moved an
    -- instance without its claim is not recorded anywhere).
    node     text NOT NULL DEFAULT '',
    instance text,
    -- The claim's token, or the run's id: what makes a finding one.
    token    text NOT NULL DEFAULT '',
    run_id   bigint,
    -- How many instances the row stands for (a late write: the batch's).
    count    bigint NOT NULL DEFAULT 1 CHECK (count > 0),
    detail   text NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX protocol_violations_once_idx ON protocol_violations (kind, workflow, instance, token) WHERE instance IS NOT NULL;
CREATE INDEX protocol_violations_at_idx ON protocol_violations (at);
