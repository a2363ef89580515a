-- renew
-- $1 instance
-- $2 token
-- $3 timeout
UPDATE "app"."invoice_claim" SET "expires_at" = now() + make_interval(secs => $3)
WHERE "instance_id" = $1 AND "token" = $2 AND "expires_at" > now() RETURNING "expires_at"
