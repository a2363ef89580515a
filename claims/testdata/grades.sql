-- grades
SELECT n.name, coalesce(g.grade, 'NORMAL')
FROM "enginehealth".nodes n LEFT JOIN "enginehealth".node_grades g ON g.node = n.name
UNION
SELECT g.node, g.grade FROM "enginehealth".node_grades g WHERE g.grade <> 'NORMAL'
