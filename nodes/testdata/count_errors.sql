-- count_errors
-- $1 node
WITH pop AS (
	SELECT name AS node FROM "enginehealth".nodes
	UNION SELECT node FROM "enginehealth".node_grades WHERE grade <> 'NORMAL'
	UNION SELECT $1::text
)
SELECT count(*) FILTER (WHERE g.grade = 'ERROR' AND p.node <> $1) AS errors, count(*) AS total
FROM pop p LEFT JOIN "enginehealth".node_grades g ON g.node = p.node
