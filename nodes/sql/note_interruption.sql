{{/*
note_interruption: moves a node's last interruption time forward (the
grader's interruption; the quiet period counts from it).

Parameters (numbered $1, $2, … in the order they first appear):
  node  the node
  at    the interruption's time
*/ -}}
UPDATE {{.Grades}} SET last_interruption_at = greatest(last_interruption_at, {{arg "at"}}) WHERE node = {{arg "node"}}
