{{/*
own_interruptions: the signatures of a node's own interruptions that
count now, newest first (the grader's own): within the window, since its
grade was last cleared (counts_from: reset-grade, quiet period), on work
interrupted on no other node within the retention, and graded already or
graded up to the interruption given (the rest of the batch is judged
after it).

Parameters (numbered $1, $2, … in the order they first appear):
  node       the node
  window     failover.window, in seconds
  retention  how far back another node's interruption counts, in seconds
  up_to      the last interruption of the batch that counts
*/ -}}
SELECT i.workflow, i.task, i.instance FROM {{.Interruptions}} i
WHERE i.node = {{arg "node"}} AND i.at > now() - make_interval(secs => {{arg "window"}}) AND (i.graded OR i.id <= {{arg "up_to"}})
	AND i.at >= coalesce((SELECT counts_from FROM {{.Grades}} WHERE node = {{arg "node"}}), '-infinity')
	AND NOT EXISTS (SELECT 1 FROM {{.Interruptions}} j WHERE j.workflow = i.workflow AND j.instance = i.instance
	                AND j.task = i.task AND j.node <> i.node AND j.at > now() - make_interval(secs => {{arg "retention"}}))
GROUP BY 1, 2, 3 ORDER BY max(i.at) DESC, max(i.id) DESC
