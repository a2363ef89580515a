{{/*
node_columns: the select list of a Node (nodes.Node's db tags), over the
nodes table aliased n (the statements that return a Node alias it so;
the subqueries name n.name, so no column of node_grades can take its
place); the grade is read from node_grades by primary key,
NORMAL for a node never graded. Not a statement: rendered once per store
and given to register, restore, get, list and ack as their Columns slot.

No parameters.
*/ -}}
name, incarnation, previous_incarnation, hostname, status, is_master,
	last_active, active_since, version, api_address,
	coalesce((SELECT g.grade FROM {{.Grades}} g WHERE g.node = n.name), 'NORMAL') AS failover_grade,
	(SELECT CASE WHEN g.rule <> '' THEN g.changed_at END FROM {{.Grades}} g WHERE g.node = n.name) AS grade_changed_at,
	coalesce((SELECT g.workflow || '/' || g.task || '/' || g.instance FROM {{.Grades}} g WHERE g.node = n.name), '') AS grade_signature,
	coalesce((SELECT g.reason FROM {{.Grades}} g WHERE g.node = n.name), '') AS grade_reason,
	status_changed_at, status_changed_by, status_reason,
	extract(epoch FROM now() - last_active)::float8 AS seconds_since_active
