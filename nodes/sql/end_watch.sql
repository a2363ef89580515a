{{/*
end_watch: a WARNING stops watching its instance, keeping the last
claimant seen (the grader's watch).

Parameters (numbered $1, $2, … in the order they first appear):
  node  the node
  seen  the last node seen claiming the instance ('' for none)
*/ -}}
UPDATE {{.Grades}} SET watching = false, seen_claimant = {{arg "seen"}} WHERE node = {{arg "node"}}
