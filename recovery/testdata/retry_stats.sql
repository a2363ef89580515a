-- retry_stats
-- $1 workflow
-- $2 task
-- $3 ends
SELECT $1::text AS workflow, $2::text AS task, count(*) AS instances,
	count(*) FILTER (WHERE a.attempt + a.manual > 0) AS retried,
	coalesce(sum(a.attempt), 0) + count(*) FILTER (WHERE a.state = 'waiting') AS scheduled,
	coalesce(sum(a.manual), 0) AS manual,
	count(*) FILTER (WHERE a.state = 'waiting') AS waiting,
	count(*) FILTER (WHERE a.state = 'exhausted') AS exhausted,
	count(*) FILTER (WHERE a.state = 'failed') AS failed,
	count(*) FILTER (WHERE a.state = 'held') AS held,
	count(*) FILTER (WHERE a.state = 'cancelled' OR a.state = 'succeeded' AND a.ended_parked) AS cancelled,
	count(*) FILTER (WHERE a.state IN ('exhausted', 'failed') AND a.attempt + a.manual > 0) AS ran,
	count(*) FILTER (WHERE a.state = 'succeeded' AND NOT a.ended_parked OR a.state = 'retried' AND EXISTS (
		SELECT 1 FROM "app"."invoices" AS t WHERE t."id" = a.instance::bigint AND t."status"::text = ANY ($3::text[]))) AS succeeded
FROM "enginehealth".attempts AS a WHERE a.workflow = $1 AND a.task = $2
