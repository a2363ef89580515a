-- raise_term
-- $1 term
-- $2 node
-- $3 incarnation
UPDATE "enginehealth"."leader_term" SET term = $1, node = $2, incarnation = $3, since = now()
WHERE term < $1
