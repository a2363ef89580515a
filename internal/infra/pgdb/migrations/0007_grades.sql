-- Failover grades (NORMAL, WARNING, ERROR) of nodes, and the interruptions
-- they are judged on.

-- One row per node that was ever graded. Kept apart from nodes so that a
-- clean shutdown (which deletes the node record) does not clear a grade:
-- only the quiet period and an operator's reset-grade do. A node without
-- a row is NORMAL.
CREATE TABLE node_grades (
    node       text PRIMARY KEY,
    grade      text NOT NULL DEFAULT 'NORMAL' CHECK (grade IN ('NORMAL', 'WARNING', 'ERROR')),
    changed_at timestamptz NOT NULL DEFAULT now(),
    -- The signature (workflow, task, instance) of the interruption that
    -- caused the last change, and why.
    workflow   text,
    task       text,
    instance   text,
    reason     text NOT NULL DEFAULT '',
    -- The rule of the last change: 'window' marks an ERROR earned by two
    -- interruptions, which the same-signature rule may take back.
    rule       text NOT NULL DEFAULT '',
    -- The last interruption of the node that counted: the quiet period
    -- runs from it.
    last_interruption_at timestamptz,
    -- While WARNING: the master watches the signature's instance, notes
    -- the last node seen claiming it, and stops watching once the
    -- instance has left the task (end state, failed, gone).
    watching   boolean NOT NULL DEFAULT false,
    seen_claimant text
);

-- An interruption: a claim of node expired and its instance was repaired
-- (by any on_interrupt decision), written in the repair's statement. The
-- master grades the rows not yet graded after each pass.
CREATE TABLE interruptions (
    id       bigserial PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    run_id   bigint NOT NULL,
    node     text NOT NULL,
    workflow text NOT NULL,
    task     text NOT NULL,
    instance text NOT NULL,
    graded   boolean NOT NULL DEFAULT false
);
-- The same-signature rule: on how many nodes was this instance interrupted?
CREATE INDEX interruptions_signature_idx ON interruptions (workflow, instance, task);
CREATE INDEX interruptions_pending_idx ON interruptions (id) WHERE NOT graded;
CREATE INDEX interruptions_at_idx ON interruptions (at);

-- The grade lives in node_grades now (it was never set here).
ALTER TABLE nodes DROP COLUMN failover_grade;
