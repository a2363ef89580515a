{{/*
pattern_compiles: matches a non_retryable pattern, as PostgreSQL's
regular expression (PGPattern), against '': a pattern PostgreSQL cannot
compile fails with a data exception (CheckCatalog, catalog.go; the
repair statement matches errors with it).

Parameters (numbered $1, $2, … in the order they first appear):
  pattern  the pattern
*/ -}}
SELECT '' ~ {{arg "pattern"}}
