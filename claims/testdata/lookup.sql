-- lookup
-- $1 instance
SELECT "node"::text, "token"::text, "claimed_at", "expires_at", "expires_at" < now() FROM "app"."invoice_claim" WHERE "instance_id" = $1
