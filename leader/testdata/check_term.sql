-- check_term
SELECT term, (SELECT system_identifier FROM pg_control_system()) AS cluster FROM "enginehealth"."leader_term" FOR SHARE
