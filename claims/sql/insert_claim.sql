{{/*
insert_claim: the claim row of a locked instance (Table.Claim and
ClaimNext, after lock_instance or lock_next), expiring after the task's
timeout on the database clock; returns its expiry. A claim row there
already (expired or not) stays: no row, already claimed.

Parameters (numbered by hand):
  $1  instance  the instance's id, as lock_instance or lock_next returned it
  $2  node      the claiming node
  $3  token     the claim's random token
  $4  timeout   the task's timeout, in seconds
*/ -}}
INSERT INTO {{.Claims}} ({{.Instance}}, {{.Node}}, {{.Token}}, {{.ClaimedAt}}, {{.ExpiresAt}})
VALUES ($1, $2, $3, now(), now() + make_interval(secs => $4))
ON CONFLICT DO NOTHING RETURNING {{.ExpiresAt}}
