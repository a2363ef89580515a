{{/*
list: a page of events in id order, through the event_log view, which
gives run events their master and term back (Log.List, rendered at each
call). A page ends early once the text of its events adds up to more
than a limit; its first event is always returned. The filters (node,
workflow, instance, kind, run_id, at's bounds) apply when set: their
slots hold the placeholders of their parameters, numbered by List from
the fourth on in that order, and are empty when not set.

Parameters (numbered by hand):
  $1  after_id   events with a larger id
  $2  limit      rows at the most
  $3  max_bytes  the text a page may add up to
  $4, $5, …      the values of the filters set
*/ -}}
SELECT id, at, kind, actor, term, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason, via
FROM (SELECT e.*,
		row_number() OVER w AS n,
		sum(octet_length(kind) + octet_length(actor) + octet_length(reason) + coalesce(octet_length(node), 0)
			+ coalesce(octet_length(workflow), 0) + coalesce(octet_length(instance), 0) + coalesce(octet_length(task), 0)
			+ coalesce(octet_length(from_state), 0) + coalesce(octet_length(to_state), 0) + coalesce(octet_length(via), 0)) OVER w AS text_bytes
	FROM {{.EventLog}} e
	WHERE id > $1
		{{- with .Node}} AND node = {{.}}{{end}}
		{{- with .Workflow}} AND workflow = {{.}}{{end}}
		{{- with .Instance}} AND instance = {{.}}{{end}}
		{{- with .Kind}} AND kind = {{.}}{{end}}
		{{- with .RunID}} AND run_id = {{.}}{{end}}
		{{- with .Since}} AND at >= {{.}}{{end}}
		{{- with .Until}} AND at < {{.}}{{end}}
	WINDOW w AS (ORDER BY id)
	ORDER BY id LIMIT $2) page
WHERE n = 1 OR text_bytes <= $3
ORDER BY id
