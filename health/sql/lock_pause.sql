{{/*
lock_pause: the pause switch, locked, as a Pause (Pauses.set, in the
master's fenced transaction, before it turns the switch: a switch there
already is refused).

No parameters.
*/ -}}
SELECT {{.Columns}} FROM {{.Pause}} FOR UPDATE
