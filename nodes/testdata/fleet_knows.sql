-- fleet_knows
-- $1 version
SELECT NOT EXISTS (SELECT 1 FROM "enginehealth".nodes AS n WHERE coalesce(n.schema_version, 0) < $1)
