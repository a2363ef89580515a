-- claim_protocol
-- $1 limit
-- $2 kind (the Record statement's)
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
	FROM gone g LEFT JOIN "app"."invoice" i ON i."id" = g.inst
), recorded AS (
	INSERT INTO expiry_log (kind, node, instance, from_state, reason)
		SELECT $2, x.node, x.instance, x.state, 'claim ' || x.token || ' of node ' || x.node || ' expired at ' || x.expires_at
		FROM expired x
)
SELECT coalesce(array_agg(inst::text), '{}') FROM gone
