{{/*
drop_old_interruptions: deletes the graded interruptions older than the
retention (Store.Grade, after grading): the same-signature rule looks
back no further.

Parameters (numbered $1, $2, … in the order they first appear):
  retention  how far back, in seconds
*/ -}}
DELETE FROM {{.Interruptions}} WHERE graded AND at < now() - make_interval(secs => {{arg "retention"}})
