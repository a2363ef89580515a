-- mark_graded
-- $1 ids
UPDATE "enginehealth".interruptions SET graded = true WHERE id = ANY ($1)
