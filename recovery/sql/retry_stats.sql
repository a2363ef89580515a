{{/*
retry_stats: sums up the attempts rows of one workflow and task as a
RetryStats, and ran, those failed for good after at least one retry
(Repairer.RetryStats, stats.go). A retried row counts as succeeded when
its instance is in one of the task's end states now: one probe of the
instance table's primary key per retried row (IDType: the id column's
type, the catalog's name).

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, task  the task
  ends            the task's end states
*/ -}}
SELECT {{arg "workflow"}}::text AS workflow, {{arg "task"}}::text AS task, count(*) AS instances,
	count(*) FILTER (WHERE a.attempt + a.manual > 0) AS retried,
	coalesce(sum(a.attempt), 0) + count(*) FILTER (WHERE a.state = 'waiting') AS scheduled,
	coalesce(sum(a.manual), 0) AS manual,
	count(*) FILTER (WHERE a.state = 'waiting') AS waiting,
	count(*) FILTER (WHERE a.state = 'exhausted') AS exhausted,
	count(*) FILTER (WHERE a.state = 'failed') AS failed,
	count(*) FILTER (WHERE a.state = 'held') AS held,
	count(*) FILTER (WHERE a.state = 'cancelled' OR a.state = 'succeeded' AND a.ended_parked) AS cancelled,
	count(*) FILTER (WHERE a.state IN ('exhausted', 'failed') AND a.attempt + a.manual > 0) AS ran,
	count(*) FILTER (WHERE a.state = 'succeeded' AND NOT a.ended_parked OR a.state = 'retried' AND EXISTS (
		SELECT 1 FROM {{.Table}} AS t WHERE t.{{.ID}} = a.instance::{{.IDType}} AND t.{{.Status}}::text = ANY ({{arg "ends"}}::text[]))) AS succeeded
FROM {{.Attempts}} AS a WHERE a.workflow = {{arg "workflow"}} AND a.task = {{arg "task"}}
