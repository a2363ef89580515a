-- unfinished_runs
-- $1 term
SELECT id, term, master, kind, trigger, scope::text AS scope, claims_expired, planned, done, status, started_at, finished_at, error, resumed_from
FROM "enginehealth".runs WHERE status = 'running' AND term < $1 ORDER BY id
