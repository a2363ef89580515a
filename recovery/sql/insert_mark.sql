{{/*
insert_mark: writes a task's failure mark, the database clock now, when
its on_failure policy is first applied: older failures are never
retried automatically (Repairer.Failures, failures.go).

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, task  the task
*/ -}}
INSERT INTO {{.Marks}} (workflow, task, mark) VALUES ({{arg "workflow"}}, {{arg "task"}}, now())
ON CONFLICT DO NOTHING
