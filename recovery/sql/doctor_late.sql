{{/*
doctor_late: a late-write finding (Repairer.Doctor, doctor.go): count
instances of a task the run decided were changed by someone else before
its repair was written (an engine moved, or claimed, an instance it did
not hold a claim on).

Parameters (numbered $1, $2, … in the order they first appear):
  workflow  the workflow
  run       the run
  count     the instances
  detail    what happened
*/ -}}
INSERT INTO {{.Violations}} (kind, workflow, node, instance, token, run_id, count, detail)
VALUES ('late_write', {{arg "workflow"}}, '', NULL, {{arg "run"}}::bigint::text, {{arg "run"}}::bigint, {{arg "count"}}, {{arg "detail"}})
RETURNING kind, workflow, node, count
