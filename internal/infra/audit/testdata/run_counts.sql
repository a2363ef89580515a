-- run_counts
-- $1 run
-- $2 from
-- $3 to
SELECT workflow, coalesce(task, '') AS task, kind, coalesce(to_state, '') AS to_state, count(*) AS count
FROM "enginehealth"."events" WHERE run_id = $1 AND at >= $2 AND at <= $3 AND workflow IS NOT NULL
GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
