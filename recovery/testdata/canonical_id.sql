-- canonical_id
-- $1 instance
SELECT "id"::text FROM "app"."invoices" WHERE "id" = $1
