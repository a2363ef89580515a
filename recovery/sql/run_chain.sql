{{/*
run_chain: a run and the runs it resumes, each the one before's
resumed_from, as an array of their ids (Repairer.runChain, recovery.go):
the runs whose expired claims a resumed run's repairs are attributed to.

Parameters (numbered $1, $2, … in the order they first appear):
  run  the run
*/ -}}
WITH RECURSIVE c AS (
	SELECT id, resumed_from FROM {{.Runs}} WHERE id = {{arg "run"}}
	UNION ALL
	SELECT r.id, r.resumed_from FROM {{.Runs}} AS r JOIN c ON r.id = c.resumed_from
)
SELECT array_agg(id ORDER BY id) FROM c
