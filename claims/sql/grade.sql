{{/*
grade: the failover grade of one node (Grade): its grade row's, else
NORMAL when it has a record (registered, never graded), else NULL (no
such node). Grade renders it with text/template (claims/grade.go: claims
depends on nothing of the daemon), once per schema.

Parameters (numbered by hand):
  $1  node  the node
*/ -}}
SELECT coalesce(
	(SELECT g.grade FROM {{.Grades}} g WHERE g.node = $1),
	(SELECT 'NORMAL' FROM {{.Nodes}} n WHERE n.name = $1))
