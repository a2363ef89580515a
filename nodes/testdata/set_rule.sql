-- set_rule
-- $1 rule
-- $2 reason
-- $3 node
UPDATE "enginehealth".node_grades SET rule = $1, reason = $2 WHERE node = $3
