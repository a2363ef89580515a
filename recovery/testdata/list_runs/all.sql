-- list_runs: the latest runs
-- $1 limit
SELECT id, term, master, kind, trigger, scope::text AS scope, claims_expired, planned, done, status, started_at, finished_at, error, resumed_from
FROM "enginehealth".runs WHERE TRUE ORDER BY id DESC LIMIT $1
