{{/*
drop_marks: deletes the failure marks of tasks without an on_failure
policy (any more) (Repairer.marks, failures.go).

Parameters (numbered $1, $2, … in the order they first appear):
  workflows, tasks  the tasks, as two arrays of one length
*/ -}}
DELETE FROM {{.Marks}}
WHERE (workflow, task) IN (SELECT * FROM unnest({{arg "workflows"}}::text[], {{arg "tasks"}}::text[]))
