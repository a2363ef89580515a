{{/*
interrupt_run: closes an unfinished run of an older term as interrupted,
its error saying the term that cut it short and what became of its work
(Repairer.Interrupt, runs.go).

Parameters (numbered $1, $2, … in the order they first appear):
  note  what became of its work
  run   the run
*/ -}}
UPDATE {{.Runs}} SET status = 'interrupted', finished_at = now(),
	error = format('cut short in term %s; %s', term, {{arg "note"}}::text)
WHERE id = {{arg "run"}} AND status = 'running'
