{{/*
expire: the master's expiry of claims: deletes up to limit claims whose
expiry has passed (database clock), re-checking it in the DELETE (a
claim renewed meanwhile stays), and records each with the caller's
statement (ExpireParams.Record), which reads the relation expired.
Table.Expire renders it with text/template (claims/expire.go: claims
depends on nothing of the daemon); the golden files in
claims/testdata/expire/ show it rendered.

Parameters (numbered by hand: the caller's follow):
  $1             limit: claims deleted at the most
  $2, $3, …      the Record statement's own
*/ -}}
WITH gone AS (
	-- Expired claims, skipping those an engine holds locked (renewing,
	-- finishing).
	DELETE FROM {{.Claims}} AS c
	WHERE c.ctid IN (SELECT ctid FROM {{.Claims}} WHERE {{.ExpiresAt}} < now() LIMIT $1 FOR UPDATE SKIP LOCKED)
	  AND c.{{.ExpiresAt}} < now()
	RETURNING c.{{.Instance}} AS inst, c.{{.Node}}::text AS node, c.{{.Token}}::text AS token, c.{{.ClaimedAt}} AS claimed_at, c.{{.ExpiresAt}} AS expires_at
), expired AS (
	-- Each with its instance's state (NULL: it has no row).
	SELECT g.inst::text AS instance, g.node, g.token, g.claimed_at, g.expires_at, i.{{.Status}}::text AS state
	FROM gone g LEFT JOIN {{.Instances}} i ON i.{{.ID}} = g.inst
), recorded AS (
	{{.Record}}
)
SELECT coalesce(array_agg(inst::text), '{}') FROM gone
