{{/*
run_columns: the select list of a RunRow (recovery.RunRow's db tags),
over the runs table. Not a statement: rendered once per repairer and
given to unfinished_runs, get_run and list_runs as their Columns slot.

No parameters.
*/ -}}
id, term, master, kind, trigger, scope::text AS scope, claims_expired, planned, done, status, started_at, finished_at, error, resumed_from
