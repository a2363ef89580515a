-- drop_old_interruptions
-- $1 retention
DELETE FROM "enginehealth".interruptions WHERE graded AND at < now() - make_interval(secs => $1)
