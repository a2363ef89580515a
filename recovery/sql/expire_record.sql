{{/*
expire_record: one claim_expired event per claim the master's expiry
deleted, in the statement that deletes them: claims' expire.sql holds it
as its Record, over the relation it names (Expired: one row per claim,
with instance, node, token, claimed_at, expires_at and the instance's
state). The reason says how long the attempt held its claim: from the
claim (or its last renewal's slide) to the expiry (Repairer.expire,
recovery.go). The golden file shows it in claims' statement.

Parameters (numbered by hand after claims' statement's own $1, its
limit):
  $2  kind      claim_expired
  $3  run       the run that expired them
  $4  workflow  the workflow
*/ -}}
INSERT INTO {{.Events}} (kind, run_id, node, workflow, instance, from_state, reason)
SELECT $2, $3, x.node, $4, x.instance, x.state,
	'claim ' || x.token || ' of node ' || x.node || ' expired at ' || x.expires_at ||
		' (claimed at ' || x.claimed_at || ', held ' || date_trunc('millisecond', x.expires_at - x.claimed_at) || ')'
FROM {{.Expired}} AS x
