-- run_chain
-- $1 run
WITH RECURSIVE c AS (
	SELECT id, resumed_from FROM "enginehealth".runs WHERE id = $1
	UNION ALL
	SELECT r.id, r.resumed_from FROM "enginehealth".runs AS r JOIN c ON r.id = c.resumed_from
)
SELECT array_agg(id ORDER BY id) FROM c
