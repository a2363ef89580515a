-- whereabouts: a workflow without claims
-- $1 instance
SELECT i."state"::text AS state, NULL::text AS node FROM "app"."reports" i WHERE i."id" = $1
