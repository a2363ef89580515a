-- begin_run
-- $1 term
-- $2 master
-- $3 kind
-- $4 trigger
-- $5 scope
-- $6 resumed_from
INSERT INTO "enginehealth".runs (term, master, kind, trigger, scope, resumed_from)
VALUES ($1, $2, $3, $4, $5, $6) RETURNING id
