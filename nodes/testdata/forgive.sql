-- forgive
-- $1 node
UPDATE "enginehealth".node_grades SET counts_from = now() WHERE node = $1
