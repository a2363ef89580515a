{{/*
delete_claim: deletes a claim, only while it exists unexpired with the
same token (Table.Finish and Release, first in their transaction: no row
deleted, the claim is lost and nothing is written).

Parameters (numbered by hand):
  $1  instance  the instance's id
  $2  token     the claim's token
*/ -}}
DELETE FROM {{.Claims}} WHERE {{.Instance}} = $1 AND {{.Token}} = $2 AND {{.ExpiresAt}} > now()
