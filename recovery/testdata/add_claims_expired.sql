-- add_claims_expired
-- $1 n
-- $2 run
UPDATE "enginehealth".runs SET claims_expired = claims_expired + $1 WHERE id = $2
