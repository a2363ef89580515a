{{/*
canonical_id: an instance's id as the database prints the id column
("063" reaches row 63), the key of its attempts rows and events
(Repairer.canonical, operator.go, for an operator's decision on named
holds).

Parameters (numbered $1, $2, … in the order they first appear):
  instance  the instance's id, as given
*/ -}}
SELECT {{.ID}}::text FROM {{.Table}} WHERE {{.ID}} = {{arg "instance"}}
