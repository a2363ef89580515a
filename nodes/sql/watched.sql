{{/*
watched: the grade rows of the WARNING nodes that watch their
signature's instance, by node, locked (the grader's watch).

No parameters.
*/ -}}
SELECT {{.Columns}} FROM {{.Grades}}
WHERE grade = 'WARNING' AND watching ORDER BY node FOR UPDATE
