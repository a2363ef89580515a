{{/*
list: every node's record as a Node, by name (Store.List).

No parameters.
*/ -}}
SELECT {{.Columns}}
FROM {{.Nodes}} AS n ORDER BY name
