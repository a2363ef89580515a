{{/*
doctor_run: the protocol doctor's findings in a run's events
(Repairer.Doctor, doctor.go): each instance the run repaired out of a
claimable workflow's interim state with no claim on it, and none seen
expiring (its event names no node): an engine entered the state without
a claim, or deleted its claim and left the instance there. The BRIN
index on at finds the run's events from its start.

Parameters (numbered $1, $2, … in the order they first appear):
  run        the run
  workflows  the claimable workflows, one per interim state
  interims   their interim states, in the same order
*/ -}}
INSERT INTO {{.Violations}} (kind, workflow, node, instance, token, run_id, detail)
SELECT 'interim_without_claim', e.workflow, '', e.instance, e.run_id::text, e.run_id,
	'repaired out of ' || e.from_state || ' by run ' || e.run_id || ': no claim was on it, none was seen expiring'
FROM {{.Events}} AS e
WHERE e.run_id = {{arg "run"}} AND e.at >= (SELECT r.started_at FROM {{.Runs}} AS r WHERE r.id = {{arg "run"}})
  AND e.node IS NULL AND e.kind IN ({{.RepairKinds}})
  AND (e.workflow, e.from_state) IN (SELECT * FROM unnest({{arg "workflows"}}::text[], {{arg "interims"}}::text[]))
ON CONFLICT (kind, workflow, instance, token) WHERE instance IS NOT NULL DO NOTHING
RETURNING kind, workflow, node, count
