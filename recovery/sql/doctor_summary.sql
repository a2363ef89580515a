{{/*
doctor_summary: the protocol doctor's findings since a time, counted by
kind, workflow and node (Repairer.Violations, the console).

Parameters (numbered $1, $2, … in the order they first appear):
  since  the window's start
*/ -}}
SELECT kind, workflow, node, sum(count)::bigint AS count, max(at) AS last
FROM {{.Violations}} WHERE at >= {{arg "since"}}
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
