-- note_interruption
-- $1 at
-- $2 node
UPDATE "enginehealth".node_grades SET last_interruption_at = greatest(last_interruption_at, $1) WHERE node = $2
