-- count_expired
SELECT count(*) FROM "app"."invoice_claim" WHERE "expires_at" < now()
