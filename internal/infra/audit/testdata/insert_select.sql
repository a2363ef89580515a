-- insert_select
-- $1 kind
-- $2 run_id
-- $3 workflow
-- $4 node
-- $5 instance
-- $6 state
-- $7 reason
INSERT INTO "enginehealth".events (kind, run_id, node, workflow, instance, from_state, reason) SELECT $1, $2, x.node, $3, x.instance, x.state, x.reason FROM (VALUES ($4, $5, $6, $7)) AS x (node, instance, state, reason)
