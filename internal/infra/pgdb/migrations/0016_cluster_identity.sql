-- The PostgreSQL cluster the schema was migrated on, by its
-- system_identifier (pg_control_system()): a streaming replica promoted
-- from it has the same one; another cluster (initdb'd apart, a restore of
-- a dump, pg_upgrade) has its own. A node compares it with the server's on
-- every new connection and refuses a server of another cluster. One row.
-- An operator who moved the database on purpose records the new cluster
-- with UPDATE cluster_identity SET system_identifier = (SELECT
-- system_identifier FROM pg_control_system()) (docs/operations.md).
CREATE TABLE cluster_identity (
    id                boolean PRIMARY KEY DEFAULT true CHECK (id),
    system_identifier bigint NOT NULL,
    recorded_at       timestamptz NOT NULL DEFAULT now()
);
INSERT INTO cluster_identity (system_identifier)
SELECT system_identifier FROM pg_control_system();
