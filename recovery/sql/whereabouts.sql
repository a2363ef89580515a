{{/*
whereabouts: where an instance is now, for the master's watch of the
work that made a node WARNING: its state and the node of the claim row
on it, if any (NULL for a workflow without claims: Claims is ""); one
probe of the instance table's primary key and one of the claims table's
(Repairer.Whereabouts, instance.go, in the grading transaction).

Parameters (numbered $1, $2, … in the order they first appear):
  instance  the instance
*/ -}}
SELECT i.{{.Status}}::text AS state, {{if .Claims -}}
	(SELECT c.{{.Node}}::text FROM {{.Claims}} c WHERE c.{{.Instance}} = i.{{.ID}} LIMIT 1)
{{- else}}NULL::text{{end}} AS node FROM {{.Table}} i WHERE i.{{.ID}} = {{arg "instance"}}
