-- previous_term
SELECT term FROM "enginehealth"."leader_term" FOR UPDATE
