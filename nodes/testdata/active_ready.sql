-- active_ready
-- $1 within
SELECT name FROM "enginehealth".nodes WHERE status = 'Ready'
	AND last_active > now() - make_interval(secs => $1) ORDER BY name
