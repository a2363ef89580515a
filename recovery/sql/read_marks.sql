{{/*
read_marks: every task's failure mark, as PostgreSQL prints it, and
whether it is older than an age (Repairer.marks, failures.go): the whole
table, a row per task with an on_failure policy.

Parameters (numbered $1, $2, … in the order they first appear):
  stale_ms  the age, in milliseconds
*/ -}}
SELECT workflow, task, mark::text AS mark,
	mark < now() - {{arg "stale_ms"}} * interval '1 millisecond' AS stale FROM {{.Marks}}
