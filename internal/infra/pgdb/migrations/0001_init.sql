-- The sidecar's own tables. The runner sets search_path to the configured
-- schema, so names here are unqualified.

-- One record per engine node (a host: one sidecar and its engines).
CREATE TABLE nodes (
    name                 text PRIMARY KEY,
    -- A fresh id per process start: a restarted node is never confused
    -- with its previous life.
    incarnation          uuid NOT NULL,
    -- The incarnation this record had when a restart found it still there.
    previous_incarnation uuid,
    hostname             text NOT NULL,
    status               text NOT NULL
        CHECK (status IN ('Recovering', 'Ready', 'Unexpected shutdown', 'Not responding')),
    is_master            boolean NOT NULL DEFAULT false,
    -- Set from the database clock only.
    last_active          timestamptz NOT NULL DEFAULT now(),
    active_since         timestamptz NOT NULL DEFAULT now(),
    version              text NOT NULL DEFAULT '',
    api_address          text NOT NULL DEFAULT '',
    failover_grade       text NOT NULL DEFAULT 'NORMAL'
        CHECK (failover_grade IN ('NORMAL', 'WARNING', 'ERROR')),
    status_changed_at    timestamptz NOT NULL DEFAULT now(),
    status_changed_by    text NOT NULL,
    status_reason        text NOT NULL DEFAULT ''
);
CREATE INDEX nodes_last_active_idx ON nodes (last_active);

-- The fencing term: the current master's election revision. One row; it
-- only moves upwards.
CREATE TABLE leader_term (
    id          boolean PRIMARY KEY DEFAULT true CHECK (id),
    term        bigint NOT NULL DEFAULT 0,
    node        text NOT NULL DEFAULT '',
    incarnation uuid,
    since       timestamptz NOT NULL DEFAULT now()
);
INSERT INTO leader_term DEFAULT VALUES;

-- Every check or recovery pass, written before its first change. A run
-- cut short by a master change is closed as interrupted by the next master
-- and its work done again by a run that points at it (resumed_from).
CREATE TABLE runs (
    id           bigserial PRIMARY KEY,
    term         bigint NOT NULL,
    master       text NOT NULL,
    kind         text NOT NULL DEFAULT 'recovery' CHECK (kind IN ('recovery', 'check')),
    trigger      text NOT NULL CHECK (trigger IN ('startup', 'periodic', 'manual')),
    scope        jsonb NOT NULL DEFAULT '{}',
    planned      bigint NOT NULL DEFAULT 0,
    done         bigint NOT NULL DEFAULT 0,
    status       text NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'finished', 'failed', 'interrupted')),
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    error        text NOT NULL DEFAULT '',
    resumed_from bigint REFERENCES runs (id)
);
CREATE INDEX runs_unfinished_idx ON runs (id) WHERE status = 'running';

-- The audit trail: every repair, expiry, status change and operator action,
-- written in the same transaction as the change it records. Read by id
-- (which follows time) and by run. Repairs write one event per instance, so
-- the table carries no foreign key and no B-tree besides its primary key:
-- run_id is written by the transaction that updates the run, and runs are
-- written in id order, so a BRIN index finds them.
CREATE TABLE events (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    kind        text NOT NULL,
    -- The node that wrote the event, and the master's term for master work.
    actor       text NOT NULL,
    term        bigint,
    run_id      bigint,
    -- The node the event is about, if any.
    node        text,
    workflow    text,
    instance    text,
    task        text,
    from_state  text,
    to_state    text,
    attempt     integer,
    reason      text NOT NULL DEFAULT ''
);
CREATE INDEX events_run_brin ON events USING brin (run_id);
-- Repair events name the node whose claim on the instance expired: found
-- through the instance's last claim_expired event.
CREATE INDEX events_claim_expired_idx ON events (workflow, instance, id)
    WHERE kind = 'claim_expired';

CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'enginehealth: the events table is append-only';
END
$$;
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION events_append_only();
