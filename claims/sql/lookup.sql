{{/*
lookup: the claim on an instance, and whether its expiry has passed on
the database clock (Table.Lookup; no row: none).

Parameters (numbered by hand):
  $1  instance  the instance's id
*/ -}}
SELECT {{.Node}}::text, {{.Token}}::text, {{.ClaimedAt}}, {{.ExpiresAt}}, {{.ExpiresAt}} < now() FROM {{.Claims}} WHERE {{.Instance}} = $1
