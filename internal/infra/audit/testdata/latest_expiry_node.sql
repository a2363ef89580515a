-- latest_expiry_node
-- $1 workflow
-- $2 instance
-- $3 runs
(SELECT e.node FROM "enginehealth"."events" e WHERE e.kind = 'claim_expired' AND e.workflow = $1 AND e.instance = $2 AND e.run_id = ANY ($3) ORDER BY e.id DESC LIMIT 1)
