-- insert_claim
-- $1 instance
-- $2 node
-- $3 token
-- $4 timeout
INSERT INTO "app"."invoice_claim" ("instance_id", "node", "token", "claimed_at", "expires_at")
VALUES ($1, $2, $3, now(), now() + make_interval(secs => $4))
ON CONFLICT DO NOTHING RETURNING "expires_at"
