-- quoted_names
-- $1 limit
-- $2 kind (the Record statement's)
WITH gone AS (
	-- Expired claims, skipping those an engine holds locked (renewing,
	-- finishing).
	DELETE FROM "Billing"."Claims" AS c
	WHERE c.ctid IN (SELECT ctid FROM "Billing"."Claims" WHERE "Expires At" < now() LIMIT $1 FOR UPDATE SKIP LOCKED)
	  AND c."Expires At" < now()
	RETURNING c."Invoice Id" AS inst, c."Node"::text AS node, c."Token"::text AS token, c."Claimed At" AS claimed_at, c."Expires At" AS expires_at
), expired AS (
	-- Each with its instance's state (NULL: it has no row).
	SELECT g.inst::text AS instance, g.node, g.token, g.claimed_at, g.expires_at, i."State"::text AS state
	FROM gone g LEFT JOIN "Billing"."Invoice Queue" i ON i."Id" = g.inst
), recorded AS (
	INSERT INTO expiry_log (kind, node, instance, from_state, reason)
		SELECT $2, x.node, x.instance, x.state, 'claim ' || x.token || ' of node ' || x.node || ' expired at ' || x.expires_at
		FROM expired x
)
SELECT coalesce(array_agg(inst::text), '{}') FROM gone
