-- An operator's action names the operator as its actor ("alice
-- (operator)") and, in via, the node that took the request from the
-- operator (the node the CLI asked; a request forwarded to the master
-- keeps the node it was sent to). NULL on every other event.
ALTER TABLE events ADD COLUMN via text;

CREATE OR REPLACE VIEW event_log AS
SELECT e.id, e.at, e.kind,
       coalesce(e.actor, r.master) AS actor,
       coalesce(e.term, r.term) AS term,
       e.run_id, e.node, e.workflow, e.instance, e.task, e.from_state, e.to_state, e.attempt, e.reason,
       e.via
FROM events e
LEFT JOIN runs r ON e.actor IS NULL AND r.id = e.run_id;
