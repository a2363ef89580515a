-- leave_interim
-- $1 instance
-- $2 interim
-- $3 to
UPDATE "app"."invoice" SET "status" = $3 WHERE "id" = $1 AND "status" = $2
