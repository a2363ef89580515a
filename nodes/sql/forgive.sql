{{/*
forgive: a node's interruptions before now stop counting (the grader's
calm, after the quiet period brought it back to NORMAL; own_interruptions
counts from counts_from).

Parameters (numbered $1, $2, … in the order they first appear):
  node  the node
*/ -}}
UPDATE {{.Grades}} SET counts_from = now() WHERE node = {{arg "node"}}
