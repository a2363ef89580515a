-- count_nodes
SELECT count(*) FROM "enginehealth".nodes WHERE status <> 'Unexpected shutdown'
