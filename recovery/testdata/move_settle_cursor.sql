-- move_settle_cursor
-- $1 after
-- $2 workflow
-- $3 task
UPDATE "enginehealth".settle_cursors SET after_id = greatest(after_id, $1)
WHERE workflow = $2 AND task = $3
