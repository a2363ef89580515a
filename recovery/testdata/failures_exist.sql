-- failures_exist
-- $1 failed
-- $2 mark
SELECT EXISTS (SELECT 1 FROM "app"."invoices" WHERE "status" = $1 AND "updated_at" >= $2::timestamptz)
