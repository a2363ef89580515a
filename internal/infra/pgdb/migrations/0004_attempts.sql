-- Retry policies (on_interrupt, on_failure): one row per workflow +
-- instance + task that a policy has acted on. Nothing is added to the
-- engines' tables: while a retry waits or a hold lasts, the instance stays
-- where it was left (left_in) and this row says why.
CREATE TABLE attempts (
    workflow        text NOT NULL,
    instance        text NOT NULL,
    task            text NOT NULL,
    -- Retries made by the policy (the original run is attempt 0). A
    -- waiting row's scheduled retry is attempt + 1.
    attempt         integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    -- Retries made by operators: not counted against max_attempts.
    manual          integer NOT NULL DEFAULT 0 CHECK (manual >= 0),
    state           text NOT NULL
        CHECK (state IN ('waiting', 'held', 'exhausted', 'retried', 'succeeded', 'cancelled', 'failed')),
    -- The policy that acted last: on_interrupt or on_failure.
    cause           text NOT NULL CHECK (cause IN ('interrupt', 'failure')),
    -- The state the instance was left in (interim or failed).
    left_in         text NOT NULL,
    -- When the row entered its state.
    since           timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz,
    next_attempt_at timestamptz,
    -- The node the instance was last interrupted on, and every such node.
    last_node       text,
    nodes           text[] NOT NULL DEFAULT '{}',
    last_reason     text NOT NULL DEFAULT '',
    last_error      text,
    CHECK ((state = 'waiting') = (next_attempt_at IS NOT NULL)),
    PRIMARY KEY (workflow, instance, task)
);
-- Due retries, by time: a pass with many retries waiting and none due
-- reads one index page.
CREATE INDEX attempts_due_idx ON attempts (next_attempt_at) WHERE state = 'waiting';
-- Open holds.
CREATE INDEX attempts_held_idx ON attempts (workflow, since) WHERE state = 'held';

-- An instance's history (events --instance, GET /v1/instances/...): a
-- hash index on instance is the cheapest index every event can pay for
-- (BenchmarkRepair); the workflow is filtered on the few rows it finds.
CREATE INDEX events_instance_idx ON events USING hash (instance);
