-- instance_state
-- $1 instance
SELECT "id"::text AS id, "status"::text AS state FROM "app"."invoices" WHERE "id" = $1
