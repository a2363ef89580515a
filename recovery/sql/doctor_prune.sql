{{/*
doctor_prune: the protocol doctor's findings older than a week are
deleted (Repairer.Doctor): a finding that lasts is recorded again then.

Parameters: none.
*/ -}}
DELETE FROM {{.Violations}} WHERE at < now() - make_interval(days => 7)
