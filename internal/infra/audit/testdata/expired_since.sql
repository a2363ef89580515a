-- expired_since
-- $1 workflow
-- $2 instance
-- $3 state
-- $4 since
EXISTS (SELECT 1 FROM "enginehealth"."events" e WHERE e.kind = 'claim_expired' AND e.workflow = $1 AND e.instance = $2 AND e.from_state = $3 AND e.at > $4)
