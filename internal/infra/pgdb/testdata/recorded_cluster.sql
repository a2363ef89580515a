-- recorded_cluster
SELECT system_identifier FROM "enginehealth".cluster_identity
