{{/*
last_id: the id of the newest event, 0 when none (Log.LastID), prepared
once per schema (New): ids only grow, so it counts the events ever
written.

No parameters.
*/ -}}
SELECT coalesce(max(id), 0) FROM {{.Events}}
