-- list_runs: the latest runs that did something or did not finish well
-- $1 limit
SELECT id, term, master, kind, trigger, scope::text AS scope, claims_expired, planned, done, status, started_at, finished_at, error, resumed_from
FROM "enginehealth".runs WHERE (claims_expired > 0 OR planned > 0 OR done > 0 OR error <> '' OR status <> 'finished' OR trigger <> 'periodic') ORDER BY id DESC LIMIT $1
