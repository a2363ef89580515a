-- lock_instance: a workflow without claims
-- $1 instance
SELECT t."id"::text AS id, t."state"::text AS state, NULL::text AS holder FROM "app"."reports" AS t
WHERE t."id" = $1 FOR UPDATE
