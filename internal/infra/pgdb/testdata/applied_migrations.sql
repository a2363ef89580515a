-- applied_migrations
SELECT version, name, applied_at FROM "enginehealth".schema_migrations ORDER BY version
