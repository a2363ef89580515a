{{/*
drop_gone_grades: deletes the NORMAL grade rows of nodes without a
record (Store.Grade, last). A WARNING or ERROR row stays: a node that
shut down cleanly gets its grade back when it returns.

No parameters.
*/ -}}
DELETE FROM {{.Grades}} g WHERE g.grade = 'NORMAL'
	AND NOT EXISTS (SELECT 1 FROM {{.Nodes}} n WHERE n.name = g.node)
