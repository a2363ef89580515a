{{/*
doctor_claims: the protocol doctor's look at one claimable workflow's
claims (Repairer.Doctor, doctor.go), each finding recorded once per
claim (its token): a claim held by a node no record names; a claim on
an instance gone, or in no task's interim state; a claim a Not
responding node took, or renewed, after it was marked (its expiry is
past the mark by more than its task's claim timeout). It returns the
findings recorded now (not those recorded before).

Parameters (numbered $1, $2, … in the order they first appear):
  interims    the workflow's tasks' interim states
  timeouts_s  their claim timeouts, in seconds, in the same order
  workflow    the workflow
  run         the run that looked
*/ -}}
WITH c AS MATERIALIZED (
	SELECT c.{{.Instance}} AS id, c.{{.Instance}}::text AS instance, c.{{.Node}} AS node, c.{{.Token}} AS token,
		c.{{.ClaimedAt}} AS claimed_at, c.{{.ExpiresAt}} AS expires_at, t.{{.Status}}::text AS status, t.{{.ID}} IS NULL AS gone,
		n.name IS NULL AS unknown, n.status AS node_status, n.status_changed_at
	FROM {{.Claims}} AS c
	LEFT JOIN {{.Table}} AS t ON t.{{.ID}} = c.{{.Instance}}
	LEFT JOIN {{.Nodes}} AS n ON n.name = c.{{.Node}}
), found AS (
	SELECT 'claim_without_node' AS kind, node, instance, token, 'claimed at ' || claimed_at || ' by ' || node || ', a node with no record' AS detail
	FROM c WHERE unknown
	UNION ALL
	SELECT 'claim_not_interim', node, instance, token,
		CASE WHEN gone THEN 'claimed by ' || node || ', and the instance is gone'
		     ELSE 'claimed by ' || node || ' in ' || status || ', no task''s interim state' END
	FROM c WHERE gone OR status <> ALL ({{arg "interims"}}::text[])
	UNION ALL
	SELECT 'claim_by_not_responding', node, instance, token,
		CASE WHEN claimed_at > status_changed_at THEN 'claimed at ' || claimed_at ELSE 'renewed to expire at ' || expires_at END
		|| ' by ' || node || ', marked Not responding at ' || status_changed_at
	FROM c WHERE node_status = 'Not responding' AND (claimed_at > status_changed_at
		OR expires_at > status_changed_at + coalesce(({{arg "timeouts_s"}}::float8[])[array_position({{arg "interims"}}::text[], status)],
			(SELECT max(s) FROM unnest({{arg "timeouts_s"}}::float8[]) AS s)) * interval '1 second')
)
INSERT INTO {{.Violations}} (kind, workflow, node, instance, token, run_id, detail)
SELECT kind, {{arg "workflow"}}, node, instance, token, {{arg "run"}}, detail FROM found
ON CONFLICT (kind, workflow, instance, token) WHERE instance IS NOT NULL DO NOTHING
RETURNING kind, workflow, node, count
