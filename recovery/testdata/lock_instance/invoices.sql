-- lock_instance: a claimable workflow
-- $1 instance
SELECT t."id"::text AS id, t."status"::text AS state, (SELECT 'node ' || c."node" || ' until ' || to_char(c."expires_at" AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
		FROM "app"."invoice_claim" c WHERE c."instance_id" = t."id" LIMIT 1) AS holder FROM "app"."invoices" AS t
WHERE t."id" = $1 FOR UPDATE
