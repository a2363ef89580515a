-- lock_next
-- $1 begin
SELECT i."id"::text FROM "app"."invoice" AS i WHERE i."status" = $1 ORDER BY i."id" LIMIT 1 FOR UPDATE SKIP LOCKED
