{{/*
away: whether a node has not heartbeated since a time (or has no
record) (the grader's watch: a WARNING's instance that ended with nobody
seen claiming it finished elsewhere if its node was away since it was
graded).

Parameters (numbered $1, $2, … in the order they first appear):
  node   the node
  since  the time (its grade's changed_at)
*/ -}}
SELECT NOT EXISTS (SELECT 1 FROM {{.Nodes}}
	WHERE name = {{arg "node"}} AND last_active >= {{arg "since"}})
