{{/*
pause_columns: the select list of the pause switch (health.Pause's db
tags). Not a statement: given to read_pause, lock_pause and set_pause as
their Columns slot.

No parameters.
*/ -}}
paused, changed_at, actor, reason, term
