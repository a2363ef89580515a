-- holds_open
SELECT count(*) AS n,
	coalesce(extract(epoch FROM now() - min(since)), 0)::float8 AS age FROM "enginehealth".attempts WHERE state = 'held'
