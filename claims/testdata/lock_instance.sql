-- lock_instance
-- $1 id
-- $2 begin
SELECT "id"::text FROM "app"."invoice" WHERE "id" = $1 AND "status" = $2 FOR UPDATE SKIP LOCKED
