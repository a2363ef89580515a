-- interrupt_run
-- $1 note
-- $2 run
UPDATE "enginehealth".runs SET status = 'interrupted', finished_at = now(),
	error = format('cut short in term %s; %s', term, $1::text)
WHERE id = $2 AND status = 'running'
