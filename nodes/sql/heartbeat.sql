{{/*
heartbeat: sets this incarnation's last_active to the database's now()
and returns it with the record's status and the node's failover grade
(NORMAL when never graded) (Store.Heartbeat). No row: the record is gone
or another incarnation's.

Parameters (numbered $1, $2, … in the order they first appear):
  name         the node
  incarnation  this process's incarnation
*/ -}}
UPDATE {{.Nodes}} AS n SET last_active = now() WHERE name = {{arg "name"}} AND incarnation = {{arg "incarnation"}}
RETURNING last_active, status, coalesce((SELECT g.grade FROM {{.Grades}} g WHERE g.node = n.name), 'NORMAL') AS grade
