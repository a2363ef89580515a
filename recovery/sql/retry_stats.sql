{{/*
retry_stats: sums up one workflow and task's retries as a RetryStats, and
ran, those failed for good after at least one retry (Repairer.RetryStats,
stats.go): the attempts rows, one per instance (its latest case), and
the cases of retries at once still open, which have none yet: read from
the events after the task's settle cursor, each instance's last retry at
once (a probe each: no attempts row, no later retry at once of the
instance). A retried row, or an open case, counts as succeeded when its
instance is in one of the task's end states now: one probe of the
instance table's primary key each (IDType: the id column's type, the
catalog's name).

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, task  the task
  ends            the task's end states
  after           the task's settle cursor (none: the newest event)
*/ -}}
WITH a AS (
	SELECT count(*) AS instances,
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
), o AS (
	SELECT count(*) AS cases, coalesce(sum(e.attempt), 0) AS retries,
		count(*) FILTER (WHERE EXISTS (SELECT 1 FROM {{.Table}} AS t
			WHERE t.{{.ID}} = e.instance::{{.IDType}} AND t.{{.Status}}::text = ANY ({{arg "ends"}}::text[]))) AS succeeded
	FROM {{.Events}} AS e
	{{.OpenCase}}
	WHERE e.id > {{arg "after"}} AND e.kind = {{.KindRepair}} AND e.attempt IS NOT NULL
	  AND e.workflow = {{arg "workflow"}} AND e.task = {{arg "task"}} AND kept.found IS NULL AND later.found IS NULL
)
SELECT {{arg "workflow"}}::text AS workflow, {{arg "task"}}::text AS task,
	a.instances + o.cases AS instances, a.retried + o.cases AS retried,
	a.scheduled + o.retries AS scheduled, a.manual, a.waiting, a.exhausted, a.failed, a.held,
	a.cancelled, a.ran, a.succeeded + o.succeeded AS succeeded
FROM a, o
