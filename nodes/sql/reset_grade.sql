{{/*
reset_grade: an operator's reset of a node's grade to NORMAL
(Store.ResetGrade, which writes the event): the signature and watch are
cleared, and the interruptions before are forgiven (counts_from).

Parameters (numbered $1, $2, … in the order they first appear):
  node    the node
  reason  why
*/ -}}
UPDATE {{.Grades}} SET grade = 'NORMAL', changed_at = now(),
	workflow = NULL, task = NULL, instance = NULL, reason = {{arg "reason"}}, watching = false, seen_claimant = NULL, rule = 'reset',
	counts_from = now()
WHERE node = {{arg "node"}}
