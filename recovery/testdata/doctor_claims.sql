-- doctor_claims
-- $1 interims
-- $2 timeouts_s
-- $3 workflow
-- $4 run
WITH c AS MATERIALIZED (
	SELECT c."instance_id" AS id, c."instance_id"::text AS instance, c."node" AS node, c."token" AS token,
		c."claimed_at" AS claimed_at, c."expires_at" AS expires_at, t."status"::text AS status, t."id" IS NULL AS gone,
		n.name IS NULL AS unknown, n.status AS node_status, n.status_changed_at
	FROM "app"."invoice_claim" AS c
	LEFT JOIN "app"."invoices" AS t ON t."id" = c."instance_id"
	LEFT JOIN "enginehealth".nodes AS n ON n.name = c."node"
), found AS (
	SELECT 'claim_without_node' AS kind, node, instance, token, 'claimed at ' || claimed_at || ' by ' || node || ', a node with no record' AS detail
	FROM c WHERE unknown
	UNION ALL
	SELECT 'claim_not_interim', node, instance, token,
		CASE WHEN gone THEN 'claimed by ' || node || ', and the instance is gone'
		     ELSE 'claimed by ' || node || ' in ' || status || ', no task''s interim state' END
	FROM c WHERE gone OR status <> ALL ($1::text[])
	UNION ALL
	SELECT 'claim_by_not_responding', node, instance, token,
		CASE WHEN claimed_at > status_changed_at THEN 'claimed at ' || claimed_at ELSE 'renewed to expire at ' || expires_at END
		|| ' by ' || node || ', marked Not responding at ' || status_changed_at
	FROM c WHERE node_status = 'Not responding' AND (claimed_at > status_changed_at
		OR expires_at > status_changed_at + coalesce(($2::float8[])[array_position($1::text[], status)],
			(SELECT max(s) FROM unnest($2::float8[]) AS s)) * interval '1 second')
)
INSERT INTO "enginehealth".protocol_violations (kind, workflow, node, instance, token, run_id, detail)
SELECT kind, $3, node, instance, token, $4, detail FROM found
ON CONFLICT (kind, workflow, instance, token) WHERE instance IS NOT NULL DO NOTHING
RETURNING kind, workflow, node, count
