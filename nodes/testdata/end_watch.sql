-- end_watch
-- $1 seen
-- $2 node
UPDATE "enginehealth".node_grades SET watching = false, seen_claimant = $1 WHERE node = $2
