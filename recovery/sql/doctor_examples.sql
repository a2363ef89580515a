{{/*
doctor_examples: the latest findings of the protocol doctor since a
time, at most per_kind of each kind, newest first (Repairer.Violations,
the console).

Parameters (numbered $1, $2, … in the order they first appear):
  since     the window's start
  per_kind  findings of each kind at the most
*/ -}}
SELECT id, at, kind, workflow, node, instance, run_id, count, detail
FROM (SELECT v.*, row_number() OVER (PARTITION BY v.kind ORDER BY v.id DESC) AS n
	FROM {{.Violations}} AS v WHERE v.at >= {{arg "since"}}) AS v
WHERE n <= {{arg "per_kind"}}
ORDER BY kind, id DESC
