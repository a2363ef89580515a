{{/*
unfinished_runs: the runs still marked running from terms before the
master's, oldest first, as RunRows (Repairer.Unfinished, runs.go): cut
short by a master crash or a lost office.

Parameters (numbered $1, $2, … in the order they first appear):
  term  the master's term
*/ -}}
SELECT {{.Columns}}
FROM {{.Runs}} WHERE status = 'running' AND term < {{arg "term"}} ORDER BY id
