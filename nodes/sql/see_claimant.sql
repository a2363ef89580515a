{{/*
see_claimant: records the node seen claiming a WARNING's instance (the
grader's watch).

Parameters (numbered $1, $2, … in the order they first appear):
  node  the node graded WARNING
  seen  the node seen claiming its instance
*/ -}}
UPDATE {{.Grades}} SET seen_claimant = {{arg "seen"}} WHERE node = {{arg "node"}}
