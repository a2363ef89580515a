{{/*
own_interruptions: a node's own interruptions that may count (the
grader's own, read once per node per batch): within the window, since
its grade was last cleared (counts_from: reset-grade, quiet period), on
work interrupted on no other node within the retention. Those graded
already come one row per signature (the newest's time and id); those not
graded yet one row each, since which of them count depends on the
interruption of the batch being judged (the grader keeps those up to it).

Parameters (numbered $1, $2, … in the order they first appear):
  node       the node
  window     failover.window, in seconds
  retention  how far back another node's interruption counts, in seconds
*/ -}}
SELECT i.workflow, i.task, i.instance, i.graded, max(i.at) AS at, max(i.id) AS id FROM {{.Interruptions}} i
WHERE i.node = {{arg "node"}} AND i.at > now() - make_interval(secs => {{arg "window"}})
	AND i.at >= coalesce((SELECT counts_from FROM {{.Grades}} WHERE node = {{arg "node"}}), '-infinity')
	AND NOT EXISTS (SELECT 1 FROM {{.Interruptions}} j WHERE j.workflow = i.workflow AND j.instance = i.instance
	                AND j.task = i.task AND j.node <> i.node AND j.at > now() - make_interval(secs => {{arg "retention"}}))
GROUP BY i.workflow, i.task, i.instance, i.graded, CASE WHEN i.graded THEN 0 ELSE i.id END
