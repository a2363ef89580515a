-- doctor_run
-- $1 run
-- $2 workflows
-- $3 interims
INSERT INTO "enginehealth".protocol_violations (kind, workflow, node, instance, token, run_id, detail)
SELECT 'interim_without_claim', e.workflow, '', e.instance, e.run_id::text, e.run_id,
	'repaired out of ' || e.from_state || ' by run ' || e.run_id || ': no claim was on it, none was seen expiring'
FROM "enginehealth".events AS e
WHERE e.run_id = $1 AND e.at >= (SELECT r.started_at FROM "enginehealth".runs AS r WHERE r.id = $1)
  AND e.node IS NULL AND e.kind IN ('instance_repaired', 'instance_retried', 'retry_scheduled', 'instance_held', 'instance_failed')
  AND (e.workflow, e.from_state) IN (SELECT * FROM unnest($2::text[], $3::text[]))
ON CONFLICT (kind, workflow, instance, token) WHERE instance IS NOT NULL DO NOTHING
RETURNING kind, workflow, node, count
