-- set_pause
-- $1 paused
-- $2 actor
-- $3 reason
-- $4 term
UPDATE "enginehealth"."pause" SET paused = $1, changed_at = now(), actor = $2, reason = $3, term = $4
	RETURNING paused, changed_at, actor, reason, term
