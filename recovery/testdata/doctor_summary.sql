-- doctor_summary
-- $1 since
SELECT kind, workflow, node, sum(count)::bigint AS count, max(at) AS last
FROM "enginehealth".protocol_violations WHERE at >= $1
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
