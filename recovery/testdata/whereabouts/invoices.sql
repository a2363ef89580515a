-- whereabouts: a claimable workflow
-- $1 instance
SELECT i."status"::text AS state, (SELECT c."node"::text FROM "app"."invoice_claim" c WHERE c."instance_id" = i."id" LIMIT 1) AS node FROM "app"."invoices" i WHERE i."id" = $1
