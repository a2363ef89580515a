-- stale
-- $1 threshold
SELECT name FROM "enginehealth".nodes WHERE status IN ('Recovering', 'Ready')
	AND last_active < now() - make_interval(secs => $1) ORDER BY name FOR UPDATE
