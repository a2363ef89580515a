{{/*
case_retries: the retries at once of instances without an attempts row,
one row per instance (instance, attempt, nodes, last_at, last_node)
whose id as text is
matched by Match (e.g. "= b.id::text"; a batch joins it to each
instance, "= u.instance": PostgreSQL checks an "= ANY" of a list that is
not a constant against each row read, the whole list each time):
the retries at once of the task (instance_repaired with an attempt) of
an instance without a row are all of its open case (a case that ends
gets its row: settle_events), so its retries are their highest attempt,
its nodes those each retry names, in order, each once, its last_at and
last_node the latest retry's time and the latest node named (what the
attempts row's last_attempt_at and last_node would say). Read through the
events' hash index on instance. Not a statement: the CaseRetries slot
of history_join (one instance, per row) and of policy_batch (the
batch's, at once), its parameters numbered with theirs.

Parameters (named; numbered by the statement that holds it):
  workflow, task  the task's workflow and name
*/ -}}
SELECT e.instance, max(e.attempt) AS attempt, coalesce((SELECT array_agg(u.n ORDER BY u.i) FROM (
			SELECT DISTINCT ON (v.n) v.n, v.i FROM unnest(array_agg(e.node ORDER BY e.id) FILTER (WHERE e.node IS NOT NULL))
				WITH ORDINALITY AS v(n, i) ORDER BY v.n, v.i) AS u), '{}') AS nodes,
		max(e.at) AS last_at, (array_agg(e.node ORDER BY e.id DESC) FILTER (WHERE e.node IS NOT NULL))[1] AS last_node
		FROM {{.Events}} AS e
		WHERE e.instance {{.Match}} AND e.workflow = {{arg "workflow"}} AND e.task = {{arg "task"}}
		  AND e.kind = {{.KindRepair}} AND e.attempt IS NOT NULL
		GROUP BY e.instance
