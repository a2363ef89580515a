package pgdb

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// firstWithSchemaVersion is the migration from which nodes record the
// schema version their binary knows: a node without it runs a binary
// that knows at most the one before.
const firstWithSchemaVersion = 15

// MigrationStatus is what `enginehealth migrate --status` says: the
// schema's migrations, applied and pending, the cluster it was migrated
// on, and the nodes whose binaries know fewer migrations than the
// database has or than this binary would apply.
type MigrationStatus struct {
	Schema string `json:"schema"`
	// DatabaseVersion is the newest migration applied (0: none, or no
	// schema); BinaryVersion the newest this binary knows.
	DatabaseVersion int `json:"database_version"`
	BinaryVersion   int `json:"binary_version"`
	// Pending is how many migrations this binary knows that are not
	// applied (migrate applies them, unless the database is newer than
	// this binary: then it refuses).
	Pending    int              `json:"pending"`
	Migrations []MigrationState `json:"migrations"`
	// Cluster holds the server's system_identifier and the one recorded at
	// migration (null before it is recorded).
	Cluster ClusterState `json:"cluster"`
	Nodes   []NodeSchema `json:"nodes"`
}

// Migration states.
const (
	MigrationApplied = "applied"
	MigrationPending = "pending"
	// MigrationUnknown marks a migration applied by a newer binary; this one
	// does not know it.
	MigrationUnknown = "unknown"
)

// MigrationState is one migration, known to this binary or applied.
type MigrationState struct {
	Version   int        `json:"version"`
	Name      string     `json:"name"`
	State     string     `json:"state"`
	AppliedAt *time.Time `json:"applied_at"`
}

// ClusterState holds the server's cluster and the one recorded at migration.
// The identifiers are JSON strings: 64-bit numbers lose digits in most
// JSON readers (jq, JavaScript), and they are compared with
// pg_controldata's output and the log's.
type ClusterState struct {
	SystemIdentifier         int64  `json:"system_identifier,string"`
	RecordedSystemIdentifier *int64 `json:"recorded_system_identifier,string"`
}

// NodeSchema is a node record and the schema version its binary knows.
type NodeSchema struct {
	Name       string    `json:"name" db:"name"`
	Hostname   string    `json:"hostname" db:"hostname"`
	Status     string    `json:"status" db:"status"`
	Version    string    `json:"version" db:"version"`
	LastActive time.Time `json:"last_active" db:"last_active"`
	// SchemaVersion is the newest migration its binary knows; null for a
	// binary that does not record it, which knows at most KnowsUpTo.
	SchemaVersion *int `json:"schema_version" db:"schema_version"`
	KnowsUpTo     int  `json:"knows_up_to" db:"-"`
	// BehindDatabase means the database has migrations its binary does not
	// know (it runs beside them; its next start is refused until it is
	// upgraded). BehindBinary: this binary would apply migrations it does
	// not know.
	BehindDatabase bool `json:"behind_database" db:"-"`
	BehindBinary   bool `json:"behind_binary" db:"-"`
}

// Status reads the migration status of schema without changing anything
// (in a read-only transaction: it works on a standby too).
func Status(ctx context.Context, db *sqlx.DB, schema string) (MigrationStatus, error) {
	st := MigrationStatus{Schema: schema, Migrations: []MigrationState{}, Nodes: []NodeSchema{}}
	ms, err := Migrations()
	if err != nil {
		return st, err
	}
	st.BinaryVersion = ms[len(ms)-1].Version
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return st, fmt.Errorf("migration status: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read only
	q := sqltext.Ident(schema)
	sts := statusStatementsOf(schema)
	var tables struct {
		Migrations bool `db:"migrations"`
		Nodes      bool `db:"nodes"`
		Identity   bool `db:"identity"`
		NodeSchema bool `db:"node_schema"`
	}
	if err := sts.tables.Get(ctx, tx, &tables, sqltext.Args{"schema": q}); err != nil {
		return st, fmt.Errorf("migration status of %s: %w", schema, err)
	}
	var applied []struct {
		Version   int       `db:"version"`
		Name      string    `db:"name"`
		AppliedAt time.Time `db:"applied_at"`
	}
	if tables.Migrations {
		if err := sts.applied.Select(ctx, tx, &applied, nil); err != nil {
			return st, fmt.Errorf("migration status of %s: %w", schema, err)
		}
	}
	done := map[int]int{}
	for i, a := range applied {
		done[a.Version] = i
		st.DatabaseVersion = max(st.DatabaseVersion, a.Version)
	}
	for _, m := range ms {
		s := MigrationState{Version: m.Version, Name: m.Name, State: MigrationPending}
		if i, ok := done[m.Version]; ok {
			s.State, s.AppliedAt = MigrationApplied, &applied[i].AppliedAt
			delete(done, m.Version)
		} else {
			st.Pending++
		}
		st.Migrations = append(st.Migrations, s)
	}
	for _, a := range applied {
		if _, ok := done[a.Version]; ok { // applied, unknown here
			st.Migrations = append(st.Migrations, MigrationState{Version: a.Version, Name: a.Name, State: MigrationUnknown, AppliedAt: &a.AppliedAt})
		}
	}
	if err := tx.GetContext(ctx, &st.Cluster.SystemIdentifier, liveIdentifier); err != nil {
		return st, fmt.Errorf("migration status: read the cluster's system_identifier: %w", err)
	}
	if tables.Identity {
		if err := sts.recorded.Get(ctx, tx, &st.Cluster.RecordedSystemIdentifier, nil); err != nil && err != sql.ErrNoRows {
			return st, fmt.Errorf("migration status of %s: %w", schema, err)
		}
	}
	if tables.Nodes {
		nodes := sts.nodes
		if tables.NodeSchema {
			nodes = sts.nodesWithVersion
		}
		if err := nodes.Select(ctx, tx, &st.Nodes, nil); err != nil {
			return st, fmt.Errorf("migration status of %s: %w", schema, err)
		}
	}
	for i := range st.Nodes {
		n := &st.Nodes[i]
		n.KnowsUpTo = firstWithSchemaVersion - 1
		if n.SchemaVersion != nil {
			n.KnowsUpTo = *n.SchemaVersion
		}
		n.BehindDatabase = n.KnowsUpTo < st.DatabaseVersion
		n.BehindBinary = n.KnowsUpTo < st.BinaryVersion
	}
	return st, nil
}
