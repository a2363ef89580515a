{{/*
set_pause: turns the pause switch (Pauses.set, after lock_pause, in the
master's fenced transaction, which writes the paused or resumed event)
and returns it as a Pause.

Parameters (numbered $1, $2, … in the order they first appear):
  paused  true: pause; false: resume
  actor   who (the operator)
  reason  why
  term    the term of the master that records it
*/ -}}
UPDATE {{.Pause}} SET paused = {{arg "paused"}}, changed_at = now(), actor = {{arg "actor"}}, reason = {{arg "reason"}}, term = {{arg "term"}}
	RETURNING {{.Columns}}
