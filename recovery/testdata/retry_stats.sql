-- retry_stats
-- $1 ends
-- $2 workflow
-- $3 task
-- $4 after
WITH a AS (
	SELECT count(*) AS instances,
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
			SELECT 1 FROM "app"."invoices" AS t WHERE t."id" = a.instance::bigint AND t."status"::text = ANY ($1::text[]))) AS succeeded
	FROM "enginehealth"."attempts" AS a WHERE a.workflow = $2 AND a.task = $3
), o AS (
	SELECT count(*) AS cases, coalesce(sum(e.attempt), 0) AS retries,
		count(*) FILTER (WHERE EXISTS (SELECT 1 FROM "app"."invoices" AS t
			WHERE t."id" = e.instance::bigint AND t."status"::text = ANY ($1::text[]))) AS succeeded
	FROM "enginehealth"."events" AS e
	LEFT JOIN LATERAL (SELECT 1 AS found FROM "enginehealth"."attempts" AS a
		WHERE a.workflow = $2 AND a.instance = e.instance AND a.task = $3 LIMIT 1) AS kept ON true
	LEFT JOIN LATERAL (SELECT 1 AS found FROM "enginehealth"."events" AS l
		WHERE l.instance = e.instance AND l.workflow = $2 AND l.task = $3 AND l.id > e.id
		  AND l.kind = 'instance_repaired' AND l.attempt IS NOT NULL LIMIT 1) AS later ON true
	WHERE e.id > $4 AND e.kind = 'instance_repaired' AND e.attempt IS NOT NULL
	  AND e.workflow = $2 AND e.task = $3 AND kept.found IS NULL AND later.found IS NULL
)
SELECT $2::text AS workflow, $3::text AS task,
	a.instances + o.cases AS instances, a.retried + o.cases AS retried,
	a.scheduled + o.retries AS scheduled, a.manual, a.waiting, a.exhausted, a.failed, a.held,
	a.cancelled, a.ran, a.succeeded + o.succeeded AS succeeded
FROM a, o
