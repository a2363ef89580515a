{{/*
update_retry: counts an operator's manual retry in the instance's
attempts row, which goes retried (what was scheduled is cancelled),
guarded by the row as lock_attempt read it: a row changed since is not
found (Repairer.Retry, operator.go).

Parameters (numbered $1, $2, … in the order they first appear):
  cause                     interrupt or failure
  left_in                   the state the instance was moved from
  reason                    the row's last reason
  workflow, instance, task  the row's key
  attempt, manual, state    the row as read
*/ -}}
UPDATE {{.Attempts}} SET manual = manual + 1, state = 'retried', cause = {{arg "cause"}},
	left_in = {{arg "left_in"}}, since = now(), last_attempt_at = now(), next_attempt_at = NULL, last_reason = {{arg "reason"}}
WHERE workflow = {{arg "workflow"}} AND instance = {{arg "instance"}} AND task = {{arg "task"}}
	AND attempt = {{arg "attempt"}} AND manual = {{arg "manual"}} AND state = {{arg "state"}}
