{{/*
clock: the database clock (Repairer.Run, runs.go: how long a run still
running has taken).

No parameters.
*/ -}}
SELECT now()
