-- drop_gone_grades
DELETE FROM "enginehealth".node_grades g WHERE g.grade = 'NORMAL'
	AND NOT EXISTS (SELECT 1 FROM "enginehealth".nodes n WHERE n.name = g.node)
