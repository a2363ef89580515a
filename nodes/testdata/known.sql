-- known
-- $1 name
SELECT EXISTS (SELECT 1 FROM "enginehealth".nodes WHERE name = $1)
