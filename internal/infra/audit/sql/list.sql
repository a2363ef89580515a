{{/*
list: a page of events in id order (newest first with Newest), through the event_log view, which
gives run events their master and term back (Log.List, rendered at each
call: the filters set decide its shape). A page ends early once the
text of its events adds up to more than a limit; its first event is
always returned. The filters (node, workflow, instance, kind, run_id,
at's bounds) apply when their switch is on, with their parameter.

Parameters (numbered $1, $2, … in the order they first appear):
  after_id   events with a larger id
  before_id  with Before: events with a smaller id
  node, workflow, instance, kind, run_id
             the filters switched on: the value kept
  since      with Since: events at or after it
  until      with Until: events before it
  limit      rows at the most
  max_bytes  the text a page may add up to
*/ -}}
SELECT id, at, kind, actor, term, run_id, node, workflow, instance, task, from_state, to_state, attempt, reason, via
FROM (SELECT e.*,
		row_number() OVER w AS n,
		sum(octet_length(kind) + octet_length(actor) + octet_length(reason) + coalesce(octet_length(node), 0)
			+ coalesce(octet_length(workflow), 0) + coalesce(octet_length(instance), 0) + coalesce(octet_length(task), 0)
			+ coalesce(octet_length(from_state), 0) + coalesce(octet_length(to_state), 0) + coalesce(octet_length(via), 0)) OVER w AS text_bytes
	FROM {{.EventLog}} e
	WHERE id > {{arg "after_id"}}
		{{- if .Before}} AND id < {{arg "before_id"}}{{end}}
		{{- if .Node}} AND node = {{arg "node"}}{{end}}
		{{- if .Workflow}} AND workflow = {{arg "workflow"}}{{end}}
		{{- if .Instance}} AND instance = {{arg "instance"}}{{end}}
		{{- if .Kind}} AND kind = {{arg "kind"}}{{end}}
		{{- if .RunID}} AND run_id = {{arg "run_id"}}{{end}}
		{{- if .Since}} AND at >= {{arg "since"}}{{end}}
		{{- if .Until}} AND at < {{arg "until"}}{{end}}
	WINDOW w AS (ORDER BY id{{if .Newest}} DESC{{end}})
	ORDER BY id{{if .Newest}} DESC{{end}} LIMIT {{arg "limit"}}) page
WHERE n = 1 OR text_bytes <= {{arg "max_bytes"}}
ORDER BY id{{if .Newest}} DESC{{end}}
