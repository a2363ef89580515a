-- retry_instance
-- $1 to
-- $2 instance
-- $3 from
UPDATE "app"."invoices" AS t SET "status" = $1 WHERE t."id" = $2 AND t."status" = $3
