{{/*
count_errors: how many nodes are ERROR besides the one named, and how
many nodes there are (the grader's raise, against
failover.max_error_fraction). The nodes: every record, and every node
graded WARNING or ERROR without one (it shut down cleanly: its grade
stays and comes back with it), the one named included.

Parameters (numbered $1, $2, … in the order they first appear):
  node  the node the grader would raise
*/ -}}
WITH pop AS (
	SELECT name AS node FROM {{.Nodes}}
	UNION SELECT node FROM {{.Grades}} WHERE grade <> 'NORMAL'
	UNION SELECT {{arg "node"}}::text
)
SELECT count(*) FILTER (WHERE g.grade = 'ERROR' AND p.node <> {{arg "node"}}) AS errors, count(*) AS total
FROM pop p LEFT JOIN {{.Grades}} g ON g.node = p.node
