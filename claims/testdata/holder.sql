-- holder
(SELECT 'node ' || c."node" || ' until ' || to_char(c."expires_at" AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
		FROM "app"."invoice_claim" c WHERE c."instance_id" = i."id" LIMIT 1)
