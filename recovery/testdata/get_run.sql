-- get_run
-- $1 run
SELECT id, term, master, kind, trigger, scope::text AS scope, claims_expired, planned, done, status, started_at, finished_at, error, resumed_from
FROM "enginehealth".runs WHERE id = $1
