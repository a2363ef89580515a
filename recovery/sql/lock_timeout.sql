{{/*
lock_timeout: how long the rest of a transaction waits for a row lock
(SET LOCAL lock_timeout, with its value as a parameter): a repair
batch's, which rather than wait is done again skipping locked rows
(Repairer.repairTask, recovery.go).

Parameters (numbered $1, $2, … in the order they first appear):
  ms  the timeout, in milliseconds (text)
*/ -}}
SELECT set_config('lock_timeout', {{arg "ms"}}, true)
