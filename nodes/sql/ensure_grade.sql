{{/*
ensure_grade: makes a NORMAL grade row for a node that has none (the
grader's load, before lock_grade).

Parameters (numbered $1, $2, … in the order they first appear):
  node  the node
*/ -}}
INSERT INTO {{.Grades}} (node) VALUES ({{arg "node"}}) ON CONFLICT DO NOTHING
