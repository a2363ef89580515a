-- heartbeat
-- $1 name
-- $2 incarnation
UPDATE "enginehealth".nodes AS n SET last_active = now() WHERE name = $1 AND incarnation = $2
RETURNING last_active, status, coalesce((SELECT g.grade FROM "enginehealth".node_grades g WHERE g.node = n.name), 'NORMAL') AS grade
