-- doctor_examples
-- $1 since
-- $2 per_kind
SELECT id, at, kind, workflow, node, instance, run_id, count, detail
FROM (SELECT v.*, row_number() OVER (PARTITION BY v.kind ORDER BY v.id DESC) AS n
	FROM "enginehealth".protocol_violations AS v WHERE v.at >= $1) AS v
WHERE n <= $2
ORDER BY kind, id DESC
