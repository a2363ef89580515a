{{/*
settle_outcome: a retry's outcome, from st, its instance's state now
(NULL: the row is gone): '' while the retry still runs (the task's
begin or interim state) and, under an on_failure policy
(FailurePolicy), when the engine failed it (the policy decides it);
else succeeded (an end state, or a state past the task), failed or
cancelled. Not a statement: the Outcome slot of settle_batch and
settle_events (Repairer.settleSlots), its parameters numbered with
theirs.

Parameters (named; numbered by the statement that holds it):
  ends, begin, interim, failed  the task's states
*/ -}}
CASE
			WHEN st IS NULL THEN 'cancelled'
			WHEN st = ANY ({{arg "ends"}}::text[]) THEN 'succeeded'
			WHEN st = {{arg "begin"}} OR st = {{arg "interim"}} THEN ''
			WHEN st = {{arg "failed"}} THEN {{if .FailurePolicy}}''{{else}}'failed'{{end}}
			ELSE 'succeeded' END
