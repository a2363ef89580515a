{{/*
holds_open: how many instances are held for an operator's decision, and
how long the oldest has waited in seconds on the database clock (0 when
none), through the partial index of open holds (Repairer.HoldsOpen,
operator.go).

No parameters.
*/ -}}
SELECT count(*) AS n,
	coalesce(extract(epoch FROM now() - min(since)), 0)::float8 AS age FROM {{.Attempts}} WHERE state = 'held'
