{{/*
ungraded: the interruptions not graded yet, oldest first, at most a
batch, locked (the grader's interruptions).

Parameters (numbered $1, $2, … in the order they first appear):
  batch  how many at most
*/ -}}
SELECT id, at, node, workflow, task, instance FROM {{.Interruptions}}
WHERE NOT graded ORDER BY id LIMIT {{arg "batch"}} FOR UPDATE
