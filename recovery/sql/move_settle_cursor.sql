{{/*
move_settle_cursor: moves a task's settle cursor of retries at once
forward (never back) to the last event id before any of its cases left
open (Repairer.settleEvents, settle.go).

Parameters (numbered $1, $2, … in the order they first appear):
  after           the new cursor
  workflow, task  the task
*/ -}}
UPDATE {{.Cursors}} SET after_id = greatest(after_id, {{arg "after"}})
WHERE workflow = {{arg "workflow"}} AND task = {{arg "task"}}
