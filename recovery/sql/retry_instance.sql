{{/*
retry_instance: moves an instance back to its task's begin state for an
operator's manual retry, only if it is still in the state read (one row
affected, else the retry fails) (Repairer.Retry, operator.go, after
lock_instance).

Parameters (numbered $1, $2, … in the order they first appear):
  to        the task's begin state
  instance  the instance
  from      its state as read
*/ -}}
UPDATE {{.Table}} AS t SET {{.Status}} = {{arg "to"}} WHERE t.{{.ID}} = {{arg "instance"}} AND t.{{.Status}} = {{arg "from"}}
