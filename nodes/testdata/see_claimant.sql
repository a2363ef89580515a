-- see_claimant
-- $1 seen
-- $2 node
UPDATE "enginehealth".node_grades SET seen_claimant = $1 WHERE node = $2
