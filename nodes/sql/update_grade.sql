{{/*
update_grade: writes a node's grade row (the grader's update; the event,
if any, is the caller's): its grade, rule, signature and reason, whether
it watches the signature's instance; the claimant seen is forgotten.
changed_at moves to now only when changed.

Parameters (numbered $1, $2, … in the order they first appear):
  node                      the node
  grade                     its grade
  changed                   the grade changed: changed_at is now
  workflow, task, instance  the signature (NULL for none)
  reason                    why
  watching                  it watches the instance
  rule                      the rule that set it
*/ -}}
UPDATE {{.Grades}} SET grade = {{arg "grade"}}, changed_at = CASE WHEN {{arg "changed"}} THEN now() ELSE changed_at END,
	workflow = {{arg "workflow"}}, task = {{arg "task"}}, instance = {{arg "instance"}}, reason = {{arg "reason"}},
	watching = {{arg "watching"}}, seen_claimant = NULL, rule = {{arg "rule"}}
WHERE node = {{arg "node"}}
