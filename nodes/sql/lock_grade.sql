{{/*
lock_grade: reads and locks a node's grade row (the grader's load, after
it made sure the row exists; Store.ResetGrade).

Parameters (numbered $1, $2, … in the order they first appear):
  node  the node
*/ -}}
SELECT {{.Columns}} FROM {{.Grades}} WHERE node = {{arg "node"}} FOR UPDATE
