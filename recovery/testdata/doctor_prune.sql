-- doctor_prune
DELETE FROM "enginehealth".protocol_violations WHERE at < now() - make_interval(days => 7)
