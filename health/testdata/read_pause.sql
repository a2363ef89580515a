-- read_pause
SELECT paused, changed_at, actor, reason, term FROM "enginehealth"."pause"
