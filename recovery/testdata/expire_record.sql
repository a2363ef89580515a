-- expire_record: claims' expiry of a claimable workflow with the events it records
-- $1 limit
-- $2 kind
-- $3 run
-- $4 workflow
WITH gone AS (
	-- Expired claims, skipping those an engine holds locked (renewing,
	-- finishing).
	DELETE FROM "app"."invoice_claim" AS c
	WHERE c.ctid IN (SELECT ctid FROM "app"."invoice_claim" WHERE "expires_at" < now() LIMIT $1 FOR UPDATE SKIP LOCKED)
	  AND c."expires_at" < now()
	RETURNING c."instance_id" AS inst, c."node"::text AS node, c."token"::text AS token, c."claimed_at" AS claimed_at, c."expires_at" AS expires_at
), expired AS (
	-- Each with its instance's state (NULL: it has no row).
	SELECT g.inst::text AS instance, g.node, g.token, g.claimed_at, g.expires_at, i."status"::text AS state
	FROM gone g LEFT JOIN "app"."invoices" i ON i."id" = g.inst
), recorded AS (
	INSERT INTO "enginehealth"."events" (kind, run_id, node, workflow, instance, from_state, reason)
SELECT $2, $3, x.node, $4, x.instance, x.state,
	'claim ' || x.token || ' of node ' || x.node || ' expired at ' || x.expires_at ||
		' (claimed at ' || x.claimed_at || ', held ' || date_trunc('millisecond', x.expires_at - x.claimed_at) || ')'
FROM expired AS x

)
SELECT coalesce(array_agg(inst::text), '{}') FROM gone
