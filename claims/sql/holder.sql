{{/*
holder: an SQL expression over the instance row aliased Alias: who
claims it ("node n2 until 2026-11-23T10:04:05Z", the claim expired or
not), or NULL when no claim row exists (Table.HolderSQL, rendered at
each call as a fragment of the caller's statement; its second line is
indented as it always was: recovery's golden files show it so).

No parameters.
*/ -}}
(SELECT 'node ' || c.{{.Node}} || ' until ' || to_char(c.{{.ExpiresAt}} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
		FROM {{.Claims}} c WHERE c.{{.Instance}} = {{.Alias}}.{{.ID}} LIMIT 1)
