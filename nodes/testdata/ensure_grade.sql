-- ensure_grade
-- $1 node
INSERT INTO "enginehealth".node_grades (node) VALUES ($1) ON CONFLICT DO NOTHING
