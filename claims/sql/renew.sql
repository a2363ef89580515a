{{/*
renew: slides a claim's expiry to the task's timeout from now, on the
database clock, only while the claim exists unexpired with the same
token (Table.Renew; no row: the claim is lost); returns the new expiry.

Parameters (numbered by hand):
  $1  instance  the instance's id
  $2  token     the claim's token
  $3  timeout   the task's timeout, in seconds
*/ -}}
UPDATE {{.Claims}} SET {{.ExpiresAt}} = now() + make_interval(secs => $3)
WHERE {{.Instance}} = $1 AND {{.Token}} = $2 AND {{.ExpiresAt}} > now() RETURNING {{.ExpiresAt}}
