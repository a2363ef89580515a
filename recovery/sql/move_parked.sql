{{/*
move_parked: moves instances parked by a policy (their attempts rows,
which the caller locked, waiting or held) back to work, or to the failed
state, in one statement: a due retry (waiting → begin, counted as the
policy's next retry) or an operator's decision on a hold (held → begin,
counted as a manual retry, or held → failed). An instance moves only if
it is still exactly where it was left and unclaimed; else its row is
cancelled with the reason (it is gone, reached an end state, was moved
or claimed by someone else; with RanElsewhere a retry someone else ran
counts as made). The rows are updated under the attempt-number guard,
one event each, and the rows planned and the moves done counted in the
run. The repairer renders
it (recovery/attempts.go, moveParked); the golden files in
recovery/testdata/move_parked/ show it rendered.

Parameters (numbered $1, $2, … in the order they first appear):
  workflow, task  the task's workflow and name
  instances       the instances, as the attempts rows name them (text)
  ids             the same, as the instance table's id column
  parked          the rows' state (waiting or held)
  to              where a moved instance goes
  left_in         the state the instances were left in
  reason          a move's reason; with RetryOf, the words before
                  "retry n of retry_of" (n: the retry the move makes)
  retry_of        (RetryOf) the policy's max_attempts
  cancelled       a cancellation's reason's beginning ("retry cancelled")
  ends            the task's end states
  begin           the task's begin state
  done            a moved row's state
  kind            a move's event kind
  cancel_kind     a cancellation's event kind
  actor, via      who decided (an operator), '' for a run's
  term            the term of an operator's decision, 0 for a run's
  run             the run counting the moves, 0 for none
*/ -}}
WITH due AS MATERIALIZED (
	-- The rows, still parked.
	SELECT a.instance AS id, a.attempt FROM {{.Attempts}} AS a
	WHERE a.workflow = {{arg "workflow"}} AND a.task = {{arg "task"}} AND a.instance = ANY ({{arg "instances"}}::text[]) AND a.state = {{arg "parked"}}
), cur AS MATERIALIZED (
	-- Where their instances are now.
	SELECT t.{{.ID}}::text AS id, t.{{.Status}}::text AS st, {{if .Claimed}}{{.Claimed}}{{else}}false{{end}} AS claimed FROM {{.Table}} AS t WHERE t.{{.ID}} = ANY ({{arg "ids"}})
), moved AS (
	-- Those still where they were left, unclaimed, move.
	UPDATE {{.Table}} AS t SET {{.Status}} = {{arg "to"}} WHERE t.{{.ID}} = ANY ({{arg "ids"}}) AND t.{{.Status}} = {{arg "left_in"}} AND {{if .Unclaimed}}{{.Unclaimed}}{{else}}TRUE{{end}}
	  AND t.{{.ID}}::text IN (SELECT id FROM due)
	RETURNING t.{{.ID}}::text AS id
), res AS MATERIALIZED (
	-- Each row's outcome: moved (ok), ended (its instance reached an
	-- end state), run elsewhere, or cancelled; and its reason.
	SELECT d.id, d.attempt, m.id IS NOT NULL AS ok, m.id IS NULL AND c.st = ANY ({{arg "ends"}}::text[]) AS ended,
		m.id IS NULL AND c.id IS NOT NULL AND {{template "elsewhere" .}} AS elsewhere,
		CASE WHEN m.id IS NOT NULL THEN {{if .RetryOf}}format('%s: retry %s of %s', {{arg "reason"}}::text, d.attempt + 1, {{arg "retry_of"}}::int){{else}}{{arg "reason"}}::text{{end}}
		     WHEN c.id IS NULL THEN {{arg "cancelled"}} || ': the instance no longer exists'
		     WHEN c.st = ANY ({{arg "ends"}}::text[]) THEN format('%s: the instance reached end state %s', {{arg "cancelled"}}, c.st)
		     WHEN {{template "elsewhere" .}} AND c.st = {{arg "begin"}} THEN format('%s: someone else moved the instance back to %s: retry %s runs there (counted as made)', {{arg "cancelled"}}, c.st, d.attempt + 1)
		     WHEN {{template "elsewhere" .}} THEN format('%s: the instance was claimed by someone else: retry %s runs there (counted as made)', {{arg "cancelled"}}, d.attempt + 1)
		     WHEN c.st <> {{arg "left_in"}} THEN format('%s: instance moved to %s by someone else', {{arg "cancelled"}}, c.st)
		     ELSE {{arg "cancelled"}} || ': the instance was claimed by someone else' END AS reason
	FROM due d LEFT JOIN moved m USING (id) LEFT JOIN cur c USING (id)
), att AS (
	-- The rows, under the attempt-number guard (see policy_batch.sql):
	-- a row changes only in the state and with the count read. A row
	-- whose instance ended is succeeded (a later case of the task counts
	-- from 0; ended_parked: statistics count it cancelled).
	UPDATE {{.Attempts}} AS a SET state = CASE WHEN x.ok THEN {{arg "done"}} WHEN x.ended THEN 'succeeded' WHEN x.elsewhere THEN 'retried' ELSE 'cancelled' END,
		attempt = CASE WHEN x.ok THEN {{template "attempt" .}} WHEN x.elsewhere THEN a.attempt + 1 ELSE a.attempt END,
		manual = CASE WHEN x.ok THEN {{if .Manual}}a.manual + 1{{else}}a.manual{{end}} ELSE a.manual END,
		last_attempt_at = CASE WHEN x.ok AND {{arg "to"}} = {{arg "begin"}} THEN now() ELSE a.last_attempt_at END,
		next_attempt_at = NULL, since = now(), last_reason = x.reason, ended_parked = coalesce(x.ended, false)
	FROM res x
	WHERE a.workflow = {{arg "workflow"}} AND a.task = {{arg "task"}} AND a.instance = x.id AND {{if .Guard}}a.state = {{arg "parked"}} AND a.attempt = x.attempt{{else}}TRUE{{end}}
	RETURNING 1
), ev AS (
	-- One event per row.
	INSERT INTO {{.Events}} (kind, actor, term, run_id, workflow, instance, task, from_state, to_state, attempt, reason, via)
	SELECT CASE WHEN x.ok THEN {{arg "kind"}} ELSE {{arg "cancel_kind"}} END, nullif({{arg "actor"}}::text, ''), nullif({{arg "term"}}::bigint, 0),
		nullif({{arg "run"}}::bigint, 0), {{arg "workflow"}}, x.id, {{arg "task"}}, {{arg "left_in"}}, CASE WHEN x.ok THEN {{arg "to"}} END,
		CASE WHEN x.ok THEN {{template "attempt" .}} WHEN x.elsewhere THEN x.attempt + 1 ELSE x.attempt END, x.reason, nullif({{arg "via"}}::text, '')
	FROM res x
), counted AS (
	-- Planned: every row decided here (the run's count left parked
	-- rows out); done: those moved.
	UPDATE {{.Runs}} SET planned = planned + (SELECT count(*) FROM res), done = done + (SELECT count(*) FROM moved) WHERE id = {{arg "run"}}
)
-- The moves; the cancelled instances and their reasons; the rows written
-- (the guard: all of them).
SELECT count(*) FILTER (WHERE ok), coalesce(array_agg(id ORDER BY id) FILTER (WHERE NOT ok), '{}'),
	coalesce(array_agg(reason ORDER BY id) FILTER (WHERE NOT ok), '{}'), (SELECT count(*) FROM att) FROM res
{{- /* A row's instance was run again elsewhere (RanElsewhere: someone
else moved it back to begin, or an engine claimed it where it was left). */}}
{{- define "elsewhere"}}{{if .RanElsewhere}}(c.st = {{arg "begin"}} OR c.st = {{arg "left_in"}} AND c.claimed){{else}}false{{end}}{{end}}
{{- /* A move's retries made: the policy's next retry counts (Counted). */}}
{{- define "attempt"}}{{if .Counted}}x.attempt + 1{{else}}x.attempt{{end}}{{end}}
