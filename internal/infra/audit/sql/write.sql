{{/*
write: one event, at the database clock's now (Log.Write, in the
transaction of the change it records), prepared once per schema (New).
An empty actor or via is NULL.

Parameters (numbered $1, $2, … in the order they first appear; an
Event's fields, by their db tags):
  kind, actor, term, run_id, node, workflow, instance, task, from_state,
  to_state, attempt, reason, via
*/ -}}
INSERT INTO {{.Events}} (kind, actor, term, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason, via)
	VALUES ({{arg "kind"}}, nullif({{arg "actor"}}, ''), {{arg "term"}}, {{arg "run_id"}}, {{arg "node"}}, {{arg "workflow"}}, {{arg "instance"}}, {{arg "task"}}, {{arg "from_state"}}, {{arg "to_state"}}, {{arg "attempt"}}, {{arg "reason"}}, nullif({{arg "via"}}, ''))
