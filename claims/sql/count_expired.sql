{{/*
count_expired: how many claims have expired, on the database clock
(Table.CountExpired, for plans).

No parameters.
*/ -}}
SELECT count(*) FROM {{.Claims}} WHERE {{.ExpiresAt}} < now()
