{{/*
add_claims_expired: adds to a run's count the claims a batch of its
expired and deleted, in that batch's fenced transaction
(Repairer.expire, recovery.go).

Parameters (numbered $1, $2, … in the order they first appear):
  n    the claims expired
  run  the run
*/ -}}
UPDATE {{.Runs}} SET claims_expired = claims_expired + {{arg "n"}} WHERE id = {{arg "run"}}
