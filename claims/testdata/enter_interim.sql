-- enter_interim
-- $1 instance
-- $2 interim
UPDATE "app"."invoice" SET "status" = $2 WHERE "id" = $1
