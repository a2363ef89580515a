{{/*
write: one event, at the database clock's now (Log.Write, in the
transaction of the change it records). An empty actor or via is NULL.
The audit package renders its files with text/template alone (it may not
import internal/infra/sqltext, another package of its layer), once per
schema (New).

Parameters (named, bound by sqlx from an Event's db tags):
  :kind, :actor, :term, :run_id, :node, :workflow, :instance, :task,
  :from_state, :to_state, :attempt, :reason, :via
*/ -}}
INSERT INTO {{.Events}} (kind, actor, term, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason, via)
	VALUES (:kind, nullif(:actor, ''), :term, :run_id, :node, :workflow, :instance, :task, :from_state, :to_state, :attempt, :reason, nullif(:via, ''))
