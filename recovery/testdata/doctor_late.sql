-- doctor_late
-- $1 workflow
-- $2 run
-- $3 count
-- $4 detail
INSERT INTO "enginehealth".protocol_violations (kind, workflow, node, instance, token, run_id, count, detail)
VALUES ('late_write', $1, '', NULL, $2::bigint::text, $2::bigint, $3, $4)
RETURNING kind, workflow, node, count
