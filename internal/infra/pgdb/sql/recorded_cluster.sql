{{/*
recorded_cluster: the system_identifier of the PostgreSQL cluster the
schema was migrated on (Status, when its cluster_identity table exists;
no row: not recorded).

No parameters.
*/ -}}
SELECT system_identifier FROM {{.Identity}}
