-- grade
-- $1 node
SELECT coalesce(
	(SELECT g.grade FROM "enginehealth".node_grades g WHERE g.node = $1),
	(SELECT 'NORMAL' FROM "enginehealth".nodes n WHERE n.name = $1))
