package pgdb

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// liveIdentifier reads the server's cluster identifier. pg_control_system()
// is executable by every role.
const liveIdentifier = "SELECT system_identifier FROM pg_control_system()"

// liveServer reads, with the identifier, what tells one server of the
// cluster from another and a server from itself before a restart or a
// promotion: when its postmaster started, and its timeline (the first 8
// hex digits of its current WAL file name; a promotion starts a new
// one). A standby (a read-only pool's) has no current WAL position.
const liveServer = `SELECT system_identifier, pg_postmaster_start_time()::text || ' timeline ' ||
	CASE WHEN pg_is_in_recovery() THEN 'in recovery' ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END
	FROM pg_control_system()`

// WrongClusterError means the server that answers at the database's address
// belongs to another PostgreSQL cluster than the one the schema was
// migrated on (its system_identifier differs). A streaming replica
// promoted from the right cluster has the same identifier, so a failover
// never causes it: another cluster is behind the address (a VIP, a DNS
// name or a proxy moved to the wrong server, a database restored into a
// new cluster).
type WrongClusterError struct {
	// Want is the identifier recorded at migration (or learnt at start);
	// Got the server's.
	Want, Got int64
	// Schema whose cluster_identity holds Want.
	Schema string
}

// Error says both identifiers, that nothing is written to the server, and
// how to record the new cluster when the database was moved on purpose.
func (e *WrongClusterError) Error() string {
	return fmt.Sprintf("a different PostgreSQL cluster is behind the database's address: its system_identifier is %d, "+
		"the schema %s was migrated on cluster %d (a replica promoted from that cluster keeps its identifier; this server is another cluster): "+
		"nothing is written to it; if the database was moved on purpose (pg_upgrade, a restore into a new cluster), record the new cluster with "+
		"UPDATE %s.cluster_identity SET system_identifier = (SELECT system_identifier FROM pg_control_system()) and restart the nodes",
		e.Got, e.Schema, e.Want, sqltext.Ident(e.Schema))
}

// Cluster guards pools against a server of another PostgreSQL cluster
// behind the database's address: once it has learnt the cluster (Learn, at
// start), every new connection of a pool opened with it (Config.Cluster)
// asks the server for its system_identifier, one query per connection, and
// a connection to another cluster is closed before it is used: the
// statement that wanted it fails with a *WrongClusterError, and callers
// retry it as they retry an unavailable database. Statements on
// connections already open are not checked: a failover breaks them, and
// the pool's next connections are new.
type Cluster struct {
	log    *slog.Logger
	schema string
	want   atomic.Int64
	known  atomic.Bool

	mu       sync.Mutex
	wrong    bool      // the last check found another cluster
	lastSaid time.Time // when a mismatch was last logged
	server   string    // the server last seen (liveServer)
	changed  time.Time // when a new connection first found another server
}

// mismatchEvery is how often a mismatch that lasts is logged again (each
// new connection attempt finds it).
const mismatchEvery = 30 * time.Second

// NewCluster returns a guard for the schema's cluster that logs to log
// (nil: not logged). It checks nothing until Learn.
func NewCluster(schema string, log *slog.Logger) *Cluster {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Cluster{log: log, schema: schema}
}

// Learn reads the identifier recorded at migration in the schema's
// cluster_identity and the server's own, and remembers it for the checks of
// new connections. Another cluster than the one recorded is a
// *WrongClusterError (a restore of the schema into a new cluster). A
// schema without the record (migrated before it existed and not since)
// learns the server's.
func (c *Cluster) Learn(ctx context.Context, db *sqlx.DB) error {
	var ids struct {
		Live     int64  `db:"live"`
		Server   string `db:"server"`
		Recorded *int64 `db:"recorded"`
	}
	q := `SELECT s.system_identifier AS live, s.server, (SELECT system_identifier FROM ` +
		sqltext.Ident(c.schema) + `.cluster_identity) AS recorded FROM (` + liveServer + `) AS s (system_identifier, server)`
	if err := db.GetContext(ctx, &ids, q); err != nil {
		return fmt.Errorf("read the cluster's system_identifier: %w", err)
	}
	c.mu.Lock()
	c.server = ids.Server
	c.mu.Unlock()
	want := ids.Live
	if ids.Recorded != nil {
		want = *ids.Recorded
	}
	c.want.Store(want)
	c.known.Store(true)
	if ids.Live != want {
		return c.mismatch(ctx, &WrongClusterError{Want: want, Got: ids.Live, Schema: c.schema})
	}
	return nil
}

// Match checks got, a server's system_identifier read inside a statement
// or transaction, against the cluster learnt: another is a
// *WrongClusterError (logged as the connection check logs it), whose
// transaction must not commit. Before Learn, anything matches. A pooler
// that keeps the sidecar's connections while it moves its own to another
// server (PgBouncer) defeats the check per new connection; a check inside
// the transaction that writes does not.
func (c *Cluster) Match(ctx context.Context, got int64) error {
	if c == nil || !c.known.Load() {
		return nil
	}
	if want := c.want.Load(); got != want {
		return c.mismatch(ctx, &WrongClusterError{Want: want, Got: got, Schema: c.schema})
	}
	return nil
}

// Verify reads the system_identifier of the server q reaches (a
// transaction's) and Matches it.
func (c *Cluster) Verify(ctx context.Context, q sqlx.QueryerContext) error {
	if c == nil || !c.known.Load() {
		return nil
	}
	var got int64
	if err := sqlx.GetContext(ctx, q, &got, liveIdentifier); err != nil {
		return fmt.Errorf("read the cluster's system_identifier: %w", err)
	}
	return c.Match(ctx, got)
}

// LiveIdentifier reads the system_identifier of the server db reaches.
func LiveIdentifier(ctx context.Context, db *sqlx.DB) (int64, error) {
	var id int64
	if err := db.GetContext(ctx, &id, liveIdentifier); err != nil {
		return 0, fmt.Errorf("read the cluster's system_identifier: %w", err)
	}
	return id, nil
}

// Identifier returns the cluster's identifier once learnt.
func (c *Cluster) Identifier() (int64, bool) { return c.want.Load(), c.known.Load() }

// ServerChanged returns when a new connection last found another server
// of the cluster behind the address than the one before it (a failover
// to a promoted replica, a restart), on this process's clock; zero when
// none has since Learn. The connections made before it went to the old
// server: whatever the database recorded then may be missing here (an
// asynchronous replica lags), and every other node is reconnecting too.
func (c *Cluster) ServerChanged() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// check asks a new connection's server for its identifier.
func (c *Cluster) check(ctx context.Context, conn driver.Conn) error {
	if !c.known.Load() {
		return nil
	}
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return errors.New("cluster check: the driver's connection cannot query")
	}
	rows, err := q.QueryContext(ctx, liveServer, nil)
	if err != nil {
		return fmt.Errorf("cluster check: %w", err)
	}
	defer func() { _ = rows.Close() }() // Next, checked below, reports a failed read
	dest := make([]driver.Value, 2)
	if err := rows.Next(dest); err != nil {
		return fmt.Errorf("cluster check: %w", err)
	}
	got, ok := dest[0].(int64)
	if !ok {
		return fmt.Errorf("cluster check: system_identifier is a %T", dest[0])
	}
	if want := c.want.Load(); got != want {
		return c.mismatch(ctx, &WrongClusterError{Want: want, Got: got, Schema: c.schema})
	}
	server, _ := dest[1].(string)
	if b, ok := dest[1].([]byte); ok {
		server = string(b)
	}
	c.mu.Lock()
	back := c.wrong
	c.wrong = false
	moved := c.server != "" && server != c.server
	if moved {
		c.changed = time.Now()
	}
	was := c.server
	c.server = server
	c.mu.Unlock()
	if back {
		c.log.InfoContext(ctx, "the PostgreSQL cluster behind the database's address is the schema's again", "system_identifier", got)
	}
	if moved {
		c.log.InfoContext(ctx, "another PostgreSQL server of the cluster answers at the database's address (a failover or a restart)",
			"server", server, "before", was)
	}
	return nil
}

// mismatch logs e, when it starts and then every mismatchEvery, and
// returns it.
func (c *Cluster) mismatch(ctx context.Context, e *WrongClusterError) error {
	c.mu.Lock()
	say := !c.wrong || time.Since(c.lastSaid) >= mismatchEvery
	c.wrong = true
	if say {
		c.lastSaid = time.Now()
	}
	c.mu.Unlock()
	if say {
		c.log.ErrorContext(ctx, "refusing the database: "+e.Error(),
			"want_system_identifier", e.Want, "got_system_identifier", e.Got)
	}
	return e
}

// guardConnector checks each new connection of a pool with its cluster.
type guardConnector struct {
	driver.Connector
	cluster *Cluster
}

func (g guardConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := g.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := g.cluster.check(ctx, conn); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}
