{{/*
batch_settings: a repair batch's transaction settings (as SET LOCAL
would set them, their values as parameters; Repairer.repairTask,
recovery.go):
- lock_timeout: how long the batch waits for a row lock; rather than
  wait, it is done again skipping locked rows. '' leaves it as it is
  (a batch that picks with SKIP LOCKED does not wait).
- work_mem: what each step of the batch statement may hold in memory
  before it writes to temporary files (the instances picked, decided,
  kept: a few hundred bytes to a few kilobytes each), kb or the
  session's value, whichever is more. At the default 4 MB a batch of
  10,000 instances that parks them wrote its decisions to disk and read
  them back three times, a twentieth of its time.

Parameters (numbered $1, $2, … in the order they first appear):
  ms  the lock timeout, in milliseconds (text), or ''
  kb  the least work_mem, in kilobytes
*/ -}}
SELECT CASE WHEN {{arg "ms"}} <> '' THEN set_config('lock_timeout', {{arg "ms"}}, true) END,
	set_config('work_mem', greatest(pg_size_bytes(current_setting('work_mem')) / 1024, {{arg "kb"}}::bigint)::text || 'kB', true)
