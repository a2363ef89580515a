{{/*
grade_columns: the select list of a node_grades row (gradeRow's db
tags). Not a statement: given to lock_grade, watched and quiet as their
Columns slot.

No parameters.
*/ -}}
node, grade, changed_at, workflow, task, instance, last_interruption_at, watching, seen_claimant, rule
