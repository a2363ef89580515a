{{/*
settle_reason: the reason a settled retry says, from next (its outcome:
settle_outcome), what (which retry, e.g. "retry 2") and st (its
instance's state now). Not a statement: the WHEN clauses of a CASE next,
the Reason slot of settle_batch and settle_events
(Repairer.settleSlots), its parameters numbered with theirs.

Parameters (named; numbered by the statement that holds it):
  ends  the task's end states
*/ -}}
WHEN 'cancelled' THEN what || ' cancelled: the instance no longer exists'
			WHEN 'failed' THEN what || ' failed: the engine moved the instance to ' || st
			WHEN 'succeeded' THEN CASE WHEN st = ANY ({{arg "ends"}}::text[])
				THEN what || ' succeeded: the instance reached ' || st
				ELSE what || ' succeeded: the instance went on to ' || st END
