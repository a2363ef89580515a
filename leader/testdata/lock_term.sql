-- lock_term
SELECT term, node, incarnation, since FROM "enginehealth"."leader_term" FOR UPDATE
