-- interrupted_on
-- $1 workflow
-- $2 instance
-- $3 task
-- $4 retention
SELECT array_agg(DISTINCT node ORDER BY node) FROM "enginehealth".interruptions
WHERE workflow = $1 AND instance = $2 AND task = $3
	AND at > now() - make_interval(secs => $4)
