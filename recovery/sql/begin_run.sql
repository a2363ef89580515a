{{/*
begin_run: writes a run's row, in a fenced transaction, and returns its
id (Repairer.beginRun, runs.go, for InRun).

Parameters (numbered $1, $2, … in the order they first appear):
  term          the master's term
  master        the master's node name
  kind          recovery or check
  trigger       startup, periodic or manual
  scope         the workflows it covers, as JSON
  resumed_from  the interrupted run it finishes, or NULL
*/ -}}
INSERT INTO {{.Runs}} (term, master, kind, trigger, scope, resumed_from)
VALUES ({{arg "term"}}, {{arg "master"}}, {{arg "kind"}}, {{arg "trigger"}}, {{arg "scope"}}, {{arg "resumed_from"}}) RETURNING id
