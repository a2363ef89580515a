-- latest_expiry_node
-- $1 workflow
-- $2 instance
(SELECT e.node FROM "enginehealth"."events" e WHERE e.kind = 'claim_expired' AND e.workflow = $1 AND e.instance = $2 ORDER BY e.id DESC LIMIT 1)
