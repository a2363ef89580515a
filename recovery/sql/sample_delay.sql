{{/*
sample_delay: Backoff.Delay's draw (delay.go) as an SQL expression over
the decision table's row Step: lo and hi (the interval, in ms), cap (the
limit, in ms) and jitter, with the database's random(): a repair batch
draws its delays in the statement that applies them. TestSampleSQL holds
it to Delay's bounds. Not a statement: the Sample slot of policy_batch.
Drawn: some step's delay is random (hi above lo, or a jitter); without,
the same expression without random(), which then is stable (the
statement need not keep each instance's draw).
*/ -}}
{{if .Drawn -}}
least({{.Step}}.cap, greatest(0, least({{.Step}}.cap, {{.Step}}.lo + random() * ({{.Step}}.hi - {{.Step}}.lo)) * (1 + {{.Step}}.jitter * (2 * random() - 1))))
{{- else -}}
least({{.Step}}.cap, greatest(0, least({{.Step}}.cap, {{.Step}}.lo)))
{{- end}}
