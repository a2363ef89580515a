-- last_id
SELECT coalesce(max(id), 0) FROM "enginehealth"."events"
