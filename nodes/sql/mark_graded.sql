{{/*
mark_graded: marks interruptions graded (the grader's interruptions,
after judging a batch).

Parameters (numbered $1, $2, … in the order they first appear):
  ids  the interruptions (bigint[])
*/ -}}
UPDATE {{.Interruptions}} SET graded = true WHERE id = ANY ({{arg "ids"}})
