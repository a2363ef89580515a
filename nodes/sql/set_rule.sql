{{/*
set_rule: changes the rule and reason of a node's grade row, nothing
else (the grader's withdraw: a WARNING held by the cap that is a plain
WARNING now, its watch going on as it was).

Parameters (numbered $1, $2, … in the order they first appear):
  node    the node
  rule    the rule
  reason  why
*/ -}}
UPDATE {{.Grades}} SET rule = {{arg "rule"}}, reason = {{arg "reason"}} WHERE node = {{arg "node"}}
