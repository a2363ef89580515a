package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
)

func newMigrateCmd() *cobra.Command {
	var (
		path   string
		status bool
		output string
	)
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the sidecar's schema migrations (the daemon also does at start), or show them with --status",
		Long: `Apply the sidecar's schema migrations to the configured database (the
daemon also does at start), in one transaction under an advisory lock.

With --status, change nothing and show the schema's migrations, applied
(with when) and pending, the PostgreSQL cluster it was migrated on, and
the nodes whose binary knows fewer migrations than the database has (they
run beside them; their next start is refused until they are upgraded) or
than this binary would apply. It reads the database alone (in a read-only
transaction; a standby will do), never etcd. Exit 0 when it could read the
database, pending migrations or not; 1 when it could not.

It reads the whole configuration file but resolves only the database's
secrets: the API token and the etcd password need not be in the
environment of the shell it runs in.`,
		Example: `  enginehealth migrate -c /etc/enginehealth/enginehealth.yaml
  enginehealth migrate --status
  enginehealth migrate --status -o json | jq '.nodes[] | select(.behind_binary) | .name'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			switch {
			case output != "table" && output != "json":
				return usageError{fmt.Errorf("--output %q: want table or json", output)}
			case c.Flags().Changed("output") && !status:
				return usageError{fmt.Errorf("--output goes with --status (see %s --help)", c.CommandPath())}
			}
			// The database alone: no API token or etcd password needed.
			cfg, err := configs.LoadDatabase(path)
			if err != nil {
				return err
			}
			app := "enginehealth migrate"
			if status {
				app += " --status"
			}
			pool := cfg.Database.Pool(app)
			pool.ReadOnly = status // a standby will do
			db, err := pgdb.Open(pool)
			if err != nil {
				return err
			}
			defer func() { _ = db.Close() }() // closing a pool after use: nothing to act on
			ctx, cancel := context.WithTimeout(c.Context(), cfg.Database.StatementTimeout)
			defer cancel()
			if status {
				st, err := pgdb.Status(ctx, db, cfg.Database.Schema)
				if err != nil {
					return fmt.Errorf("%w (database %s)", err, cfg.Database.RedactedDSN())
				}
				if output == "json" {
					return writeJSON(c.OutOrStdout(), st)
				}
				return migrationTable(c.OutOrStdout(), st, cfg.Database.RedactedDSN())
			}
			applied, err := pgdb.Migrate(ctx, db, cfg.Database.Schema)
			if newer := (*pgdb.NewerSchemaError)(nil); errors.As(err, &newer) {
				// As run: this binary must be upgraded, no retry helps.
				return usageError{fmt.Errorf("%w (database %s)", err, cfg.Database.RedactedDSN())}
			}
			if err != nil {
				return fmt.Errorf("%w (database %s)", err, cfg.Database.RedactedDSN())
			}
			if len(applied) == 0 {
				fmt.Fprintf(c.OutOrStdout(), "schema %s is up to date\n", cfg.Database.Schema)
				return nil
			}
			fmt.Fprintf(c.OutOrStdout(), "schema %s: applied migrations %v\n", cfg.Database.Schema, applied)
			return nil
		},
	}
	configFlag(c, &path)
	c.Flags().BoolVar(&status, "status", false, "show applied and pending migrations and the nodes they leave behind; change nothing")
	c.Flags().StringVarP(&output, "output", "o", "table", "output format of --status: table or json")
	return c
}

// migrationTable prints the migration status for people.
func migrationTable(w io.Writer, st pgdb.MigrationStatus, where string) error {
	fmt.Fprintf(w, "schema %s in %s: at version %d; this binary migrates to %d", safe(st.Schema), safe(where), st.DatabaseVersion, st.BinaryVersion)
	switch {
	case st.DatabaseVersion > st.BinaryVersion:
		fmt.Fprintf(w, "; the database is newer: this binary refuses it (upgrade enginehealth)\n")
	case st.Pending > 0:
		fmt.Fprintf(w, "; %d %s pending (enginehealth migrate, or the next start of a node, applies %s)\n",
			st.Pending, plural(int64(st.Pending), "migration", "migrations"), plural(int64(st.Pending), "it", "them"))
	default:
		fmt.Fprintf(w, "; up to date\n")
	}
	if err := tabs(w, "VERSION\tNAME\tAPPLIED AT", func(tw io.Writer) {
		for _, m := range st.Migrations {
			at := m.State
			if m.AppliedAt != nil {
				at = m.AppliedAt.UTC().Format(time.RFC3339)
				if m.State == pgdb.MigrationUnknown {
					at += " (by a newer binary: unknown to this one)"
				}
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\n", m.Version, safe(m.Name), at)
		}
	}); err != nil {
		return err
	}
	fmt.Fprintln(w)
	switch r := st.Cluster.RecordedSystemIdentifier; {
	case r == nil:
		fmt.Fprintf(w, "cluster: system_identifier %d (none recorded yet: migrating records it)\n", st.Cluster.SystemIdentifier)
	case *r == st.Cluster.SystemIdentifier:
		fmt.Fprintf(w, "cluster: system_identifier %d, the one the schema was migrated on\n", st.Cluster.SystemIdentifier)
	default:
		fmt.Fprintf(w, "cluster: system_identifier %d, NOT the one the schema was migrated on (%d): another PostgreSQL cluster; nodes refuse it\n",
			st.Cluster.SystemIdentifier, *r)
	}
	fmt.Fprintln(w)
	if len(st.Nodes) == 0 {
		fmt.Fprintln(w, "no node records")
		return nil
	}
	behind := 0
	err := tabs(w, "NODE\tSTATUS\tVERSION\tKNOWS SCHEMA\tAFFECTED", func(tw io.Writer) {
		for _, n := range st.Nodes {
			knows := strconv.Itoa(n.KnowsUpTo)
			if n.SchemaVersion == nil {
				knows = "≤" + knows // a binary from before it was recorded
			}
			affected := "no"
			switch {
			case n.BehindDatabase:
				affected = fmt.Sprintf("behind the database (%d): runs, but its next start is refused until it is upgraded", st.DatabaseVersion)
			case n.BehindBinary:
				affected = fmt.Sprintf("behind this binary (%d): once migrated, its next start is refused until it is upgraded", st.BinaryVersion)
			}
			if n.BehindDatabase || n.BehindBinary {
				behind++
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", safe(n.Name), safe(n.Status), safe(n.Version), knows, affected)
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d of %d %s affected\n", behind, len(st.Nodes), plural(int64(len(st.Nodes)), "node", "nodes"))
	return nil
}
