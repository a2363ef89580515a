package recovery

import "embed"

// statements: the repairer's SQL, as templates (internal/infra/sqltext).
//
//go:embed sql/*.sql
var statements embed.FS
