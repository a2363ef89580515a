{{/*
instance_state: an instance's row: its id as the database prints it
(the key of its attempts rows and events) and its state
(Repairer.Instance, instance.go).

Parameters (numbered $1, $2, … in the order they first appear):
  instance  the instance's id, as given
*/ -}}
SELECT {{.ID}}::text AS id, {{.Status}}::text AS state FROM {{.Table}} WHERE {{.ID}} = {{arg "instance"}}
