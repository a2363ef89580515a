-- per_minute
-- $1 since
SELECT date_bin(make_interval(mins => 1), at, $1) AS minute, kind, count(*) AS count
FROM "enginehealth"."events"
WHERE at >= $1
GROUP BY 1, 2
