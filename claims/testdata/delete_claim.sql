-- delete_claim
-- $1 instance
-- $2 token
DELETE FROM "app"."invoice_claim" WHERE "instance_id" = $1 AND "token" = $2 AND "expires_at" > now()
