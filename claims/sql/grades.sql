{{/*
grades: the failover grade of every registered node (NORMAL when never
graded), and of every node without a record that is WARNING or ERROR (a
clean shutdown keeps the grade) (Grades). Grades renders it with
text/template (claims/grade.go: claims depends on nothing of the
daemon), once per schema.

No parameters.
*/ -}}
SELECT n.name, coalesce(g.grade, 'NORMAL')
FROM {{.Nodes}} n LEFT JOIN {{.Grades}} g ON g.node = n.name
UNION
SELECT g.node, g.grade FROM {{.Grades}} g WHERE g.grade <> 'NORMAL'
