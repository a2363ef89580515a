-- Pause: one row, the cluster's pause switch. While paused the master
-- keeps heartbeats, status marking and the audit trail but makes no
-- automatic repair, claim expiry or retry. It lives in the database so a
-- new master stays paused; it is written by the master in a fenced
-- transaction, with a paused/resumed event.
CREATE TABLE pause (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    paused     boolean NOT NULL DEFAULT false,
    changed_at timestamptz NOT NULL DEFAULT now(),
    actor      text NOT NULL DEFAULT '',
    reason     text NOT NULL DEFAULT '',
    term       bigint
);
INSERT INTO pause DEFAULT VALUES;
