// Package nodes keeps the engine node registry: one record per node in the
// sidecar schema, registered at start, heartbeated on the database clock,
// deleted on clean shutdown.
//
// Life cycle of a record:
//
//	(none) --Register--> Recovering --(master, after start-up recovery)--> Ready
//	existing record --Register--> Unexpected shutdown  (the last run died)
//	Unexpected shutdown --Ack (operator)--> Recovering
//	Recovering, Ready --(master: no heartbeat)--> Not responding --(heartbeats again)--> Ready
//	any but Unexpected shutdown --Deregister--> (none)  (clean shutdown)
//
// Unexpected shutdown is left only by an operator's Ack (or, with
// Registration.RecoverAfterCrash, never entered): the master never marks
// such a node Not responding, so it can never be revived to Ready, nor
// forgotten, whatever its heartbeats do; a clean stop keeps the record
// (Deregister returns ErrAwaitingAck) and a restart finds it still there.
//
// Every status change writes an event in the same transaction. Time is the
// database's: last_active is set with now() in SQL and staleness is computed
// in SQL, so a skewed host clock can neither make a live node look dead nor
// a dead one alive.
package nodes

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/faultinject"
	"github.com/enginehealth/enginehealth/leader"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// Status is a node record's status.
type Status string

// Node statuses.
const (
	StatusRecovering         Status = "Recovering"
	StatusReady              Status = "Ready"
	StatusUnexpectedShutdown Status = "Unexpected shutdown"
	StatusNotResponding      Status = "Not responding"
)

// Statuses are the statuses a node record may have.
var Statuses = []Status{StatusRecovering, StatusReady, StatusUnexpectedShutdown, StatusNotResponding}

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// String returns the status as the nodes table and the API write it.
func (s Status) String() string { return string(s) }

var (
	// ErrNotFound means there is no record with that name.
	ErrNotFound = errors.New("nodes: not found")
	// ErrNotRegistered means this incarnation has no record any more; it was
	// deleted, or another process registered under the same name.
	ErrNotRegistered = errors.New("nodes: this incarnation is not registered")
)

// Node is one engine node record.
type Node struct {
	Name                string    `db:"name"`
	Incarnation         string    `db:"incarnation"`
	PreviousIncarnation *string   `db:"previous_incarnation"`
	Hostname            string    `db:"hostname"`
	Status              Status    `db:"status"`
	IsMaster            bool      `db:"is_master"`
	LastActive          time.Time `db:"last_active"`
	ActiveSince         time.Time `db:"active_since"`
	Version             string    `db:"version"`
	APIAddress          string    `db:"api_address"`
	// FailoverGrade is NORMAL, WARNING or ERROR (grade.go); the grade
	// outlives the record (a clean restart keeps it).
	FailoverGrade string `db:"failover_grade"`
	// GradeChangedAt, GradeSignature (workflow/task/instance of the
	// interruption that caused it) and GradeReason of the last grade
	// change; empty while the node was never graded.
	GradeChangedAt  *time.Time `db:"grade_changed_at"`
	GradeSignature  string     `db:"grade_signature"`
	GradeReason     string     `db:"grade_reason"`
	StatusChangedAt time.Time  `db:"status_changed_at"`
	StatusChangedBy string     `db:"status_changed_by"`
	StatusReason    string     `db:"status_reason"`
	// SecondsSinceActive is now() − last_active on the database clock.
	SecondsSinceActive float64 `db:"seconds_since_active"`
}

// noHeartbeat begins the reason of a node marked Not responding (then the
// threshold, who marked it and in which term).
const noHeartbeat = "no heartbeat for more than "

// Why says in words why node n is where it is: how long it has been
// silent and who marked it, what it waits for, and its failover grade
// when not NORMAL. Empty for a Ready NORMAL node.
func Why(n Node) string {
	var why string
	switch n.Status {
	case StatusNotResponding:
		why = fmt.Sprintf("no heartbeat for %.0f s", n.SecondsSinceActive)
		if rest, ok := strings.CutPrefix(n.StatusReason, noHeartbeat); ok {
			why += " > " + rest // "> 30s; marked by n2 in term 7"
		} else if n.StatusReason != "" {
			why += "; " + n.StatusReason
		}
	case StatusUnexpectedShutdown:
		why = n.StatusReason + "; stays out of service until an operator runs: enginehealth node ack " + n.Name
	case StatusRecovering:
		why = "waiting for the master to finish recovery and bring it to Ready"
		if n.StatusReason != "" {
			why = n.StatusReason + "; " + why
		}
	}
	if n.FailoverGrade != "" && n.FailoverGrade != GradeNormal {
		g := "failover grade " + n.FailoverGrade
		if n.GradeReason != "" {
			g += ": " + n.GradeReason
		}
		if why != "" {
			why += "; "
		}
		why += g
	}
	return why
}

// Store reads and writes node records of one sidecar schema.
type Store struct {
	db     *sqlx.DB
	sql    statements // rendered for the schema
	events *audit.Log
	// cluster, when set, is checked before a lost record is written again
	// (StoreConfig.Cluster).
	cluster *pgdb.Cluster
}

// StoreConfig of a Store.
type StoreConfig struct {
	// DB is the pool the store reads and writes through (required).
	DB *sqlx.DB
	// Schema is the sidecar schema; default pgdb.DefaultSchema.
	Schema string
	// Events is the event log of the same schema (required; the daemon
	// makes one and shares it).
	Events *audit.Log
	// Cluster, when set, makes the store check that the server belongs
	// to Cluster's PostgreSQL cluster before it takes a missing record for
	// one the database lost: behind a pooler that moved to another
	// cluster, the record is missing because the server is the wrong one.
	Cluster *pgdb.Cluster
}

// NewStore returns the store of a sidecar schema. It fails when cfg
// lacks the pool or the event log.
func NewStore(cfg StoreConfig) (*Store, error) {
	switch {
	case cfg.DB == nil:
		return nil, errors.New("nodes: a store needs a database pool (StoreConfig.DB)")
	case cfg.Events == nil:
		return nil, errors.New("nodes: a store needs the event log (StoreConfig.Events)")
	}
	return &Store{db: cfg.DB, sql: newStatements(cmp.Or(cfg.Schema, pgdb.DefaultSchema), faultinject.Off(faultinject.Ack)),
		events: cfg.Events, cluster: cfg.Cluster}, nil
}

// Registration describes this process to Register.
type Registration struct {
	Name        string
	Incarnation string
	Hostname    string
	Version     string
	APIAddress  string
	// SchemaVersion is the newest migration this binary knows (0: not
	// recorded); `enginehealth migrate --status` reads it.
	SchemaVersion int
	// RecoverAfterCrash means a record left by a run that did not shut down
	// cleanly goes to Recovering (like a new node) instead of Unexpected
	// shutdown.
	RecoverAfterCrash bool
}

// heldRecord is what a registration needs to know of the record it
// replaces.
type heldRecord struct {
	Status      Status    `db:"status"`
	Incarnation string    `db:"incarnation"`
	Hostname    string    `db:"hostname"`
	ActiveSince time.Time `db:"active_since"`
}

// lockRecord reads and locks node name's record, if there is one.
func (s *Store) lockRecord(ctx context.Context, tx *pgdb.Tx, name string) (heldRecord, bool, error) {
	var prev heldRecord
	err := s.sql.lockRecord.Get(ctx, tx, &prev, sqltext.Args{"name": name})
	if errors.Is(err, sql.ErrNoRows) {
		return prev, false, nil
	}
	return prev, err == nil, err
}

// Register writes this node's record. A new record starts in Recovering. If
// a record with the name already exists, the last run did not shut down
// cleanly: the record takes the new incarnation, keeps the old one in
// PreviousIncarnation, and goes to Unexpected shutdown (or, with
// RecoverAfterCrash, to Recovering). Either way one event is written in the
// same transaction.
func (s *Store) Register(ctx context.Context, r Registration) (Node, error) {
	var n Node
	err := pgdb.InTx(ctx, s.db, func(tx *pgdb.Tx) error {
		prev, _, err := s.lockRecord(ctx, tx, r.Name)
		if err != nil {
			return err
		}
		if err := s.sql.register.Get(ctx, tx, &n, sqltext.Args{"name": r.Name, "incarnation": r.Incarnation, "hostname": r.Hostname,
			"version": r.Version, "api_address": r.APIAddress, "schema_version": r.SchemaVersion, "recover_after_crash": r.RecoverAfterCrash}); err != nil {
			return err
		}
		e := audit.Event{Actor: r.Name, Node: &r.Name, ToState: audit.Str(string(n.Status)), Reason: n.StatusReason}
		if n.PreviousIncarnation == nil {
			e.Kind = audit.KindNodeRegistered
		} else {
			e.Kind = audit.KindNodeStatus
			e.FromState = audit.Str(string(prev.Status))
			if prev.Status == StatusUnexpectedShutdown && n.Status == StatusUnexpectedShutdown {
				e.Reason = "restarted while awaiting an operator ack (previous incarnation " + prev.Incarnation + ")"
			}
		}
		return s.events.Write(ctx, tx, e)
	})
	if err != nil {
		return Node{}, fmt.Errorf("register node %s: %w", r.Name, err)
	}
	return n, nil
}

// Restore writes this incarnation's record again when the database lost
// it. registered is what Register returned for this incarnation. The
// record is lost when it is gone (the registration, or the whole record,
// was lost with an asynchronous replica's lag, or the master forgot the
// node while it could not reach the database), or when it is an earlier
// run's: the one this registration replaced, or one registered before it
// (a run whose clean stop the database lost too). The record takes
// status (the last one this incarnation saw, or the one it registered in)
// and one event says why; in Unexpected shutdown, it keeps the crash it
// awaits an ack for. A record registered after this one is a later
// process's with the same name: it is left alone and the error, an
// ErrNotRegistered, names it.
func (s *Store) Restore(ctx context.Context, r Registration, registered Node, status Status) (Node, error) {
	var n Node
	err := pgdb.InTx(ctx, s.db, func(tx *pgdb.Tx) error {
		if err := s.cluster.Verify(ctx, tx); err != nil {
			return err
		}
		prev, found, err := s.lockRecord(ctx, tx, r.Name)
		earlier := found && (registered.PreviousIncarnation != nil && prev.Incarnation == *registered.PreviousIncarnation ||
			prev.ActiveSince.Before(registered.ActiveSince))
		switch {
		case err != nil:
			return err
		case found && prev.Incarnation == r.Incarnation: // restored already
			return s.sql.get.Get(ctx, tx, &n, sqltext.Args{"name": r.Name})
		case found && !earlier:
			return fmt.Errorf("%w: another run of node %s holds the record, registered after this one: incarnation %s on host %s, since %s",
				ErrNotRegistered, r.Name, prev.Incarnation, prev.Hostname, prev.ActiveSince.UTC().Format(time.RFC3339))
		}
		reason := "registration restored: the database had lost it (a failover to a replica that had not received it?)"
		if !found {
			reason = "registration restored: the database had lost the record (a failover to a replica that had not received it, or forgotten)"
		}
		var previous *string // the record's, or none
		if found {
			previous = &prev.Incarnation
		}
		if status == StatusUnexpectedShutdown && registered.Status == StatusUnexpectedShutdown {
			// Still awaiting the ack for the crash it registered after.
			reason = registered.StatusReason + "; " + reason
			previous = registered.PreviousIncarnation
		}
		if err := s.sql.restore.Get(ctx, tx, &n, sqltext.Args{"name": r.Name, "incarnation": r.Incarnation, "hostname": r.Hostname,
			"status": status, "version": r.Version, "api_address": r.APIAddress, "reason": reason, "schema_version": r.SchemaVersion,
			"previous": previous}); err != nil {
			return err
		}
		e := audit.Event{Kind: audit.KindNodeRegistered, Actor: r.Name, Node: &r.Name, ToState: audit.Str(string(n.Status)), Reason: reason}
		if found {
			e.Kind = audit.KindNodeStatus
			e.FromState = audit.Str(string(prev.Status))
		}
		return s.events.Write(ctx, tx, e)
	})
	if err != nil {
		return Node{}, fmt.Errorf("restore the registration of node %s: %w", r.Name, err)
	}
	return n, nil
}

// Beat is what a heartbeat returns.
type Beat struct {
	// LastActive as the database set it.
	LastActive time.Time `db:"last_active"`
	// Status of the record.
	Status Status `db:"status"`
	// Grade is the node's failover grade.
	Grade string `db:"grade"`
}

// Heartbeat sets last_active to the database's now() and returns it with
// the record's status. It returns ErrNotRegistered when the record is gone
// or belongs to another incarnation.
func (s *Store) Heartbeat(ctx context.Context, name, incarnation string) (Beat, error) {
	var b Beat
	err := s.sql.heartbeat.Get(ctx, s.db, &b, sqltext.Args{"name": name, "incarnation": incarnation})
	if errors.Is(err, sql.ErrNoRows) {
		return Beat{}, fmt.Errorf("heartbeat %s: %w", name, ErrNotRegistered)
	}
	if err != nil {
		return Beat{}, fmt.Errorf("heartbeat %s: %w", name, err)
	}
	return b, nil
}

// reset closes the pool's connections (pgdb.Reset): the server stopped
// answering.
func (s *Store) reset() { pgdb.Reset(s.db) }

// ActiveReady returns the names of the nodes that are Ready and whose
// last_active is within the given age (database clock): nodes whose
// engines may be running. None means a cold cluster. The asking node
// counts too: a master that is Ready already (a lone node elected again
// after an etcd outage, a standby that takes over) has its own engine
// running; a node that has just started is Recovering, not Ready.
func (s *Store) ActiveReady(ctx context.Context, within time.Duration) ([]string, error) {
	names := []string{}
	err := s.sql.activeReady.Select(ctx, s.db, &names, sqltext.Args{"within": within.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("list active ready nodes: %w", err)
	}
	return names, nil
}

// PromoteRecovering moves every node in Recovering to Ready, with an event
// each, inside the caller's (fenced) transaction, and returns their names.
func (s *Store) PromoteRecovering(ctx context.Context, tx *leader.Tx, actor string, term int64, reason string) ([]string, error) {
	names := []string{}
	err := s.sql.promoteRecovering.Select(ctx, tx, &names, sqltext.Args{"actor": actor, "reason": reason})
	if err != nil {
		return nil, fmt.Errorf("promote recovering nodes: %w", err)
	}
	from, to := StatusRecovering, StatusReady
	for _, n := range names {
		if err := s.events.Write(ctx, tx, audit.Event{
			Kind: audit.KindNodeStatus, Actor: actor, Term: &term, Node: &n,
			FromState: audit.Str(string(from)), ToState: audit.Str(string(to)), Reason: reason,
		}); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// ErrNotAcknowledgeable means the node is not in Unexpected shutdown.
var ErrNotAcknowledgeable = errors.New("nodes: not in " + string(StatusUnexpectedShutdown))

// Ack is an operator's acknowledgement of an unexpected shutdown: the node
// goes to Recovering, with an event naming who acknowledged it, and from
// there on like a newly registered node: it campaigns, and the master
// makes it Ready after start-up recovery. It is the only way out of
// Unexpected shutdown.
func (s *Store) Ack(ctx context.Context, name string, by audit.By, reason string) (Node, error) {
	var n Node
	err := pgdb.InTx(ctx, s.db, func(tx *pgdb.Tx) error {
		var status Status
		err := s.sql.ackLock.Get(ctx, tx, &status, sqltext.Args{"name": name})
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if status != StatusUnexpectedShutdown {
			return fmt.Errorf("%w: it is %s", ErrNotAcknowledgeable, status)
		}
		if err := s.sql.ack.Get(ctx, tx, &n, sqltext.Args{"name": name, "actor": by.Actor, "reason": reason}); err != nil {
			return err
		}
		from, to := StatusUnexpectedShutdown, StatusRecovering
		return s.events.Write(ctx, tx, audit.Event{
			Kind: audit.KindNodeAck, Actor: by.Actor, Via: audit.Str(by.Via), Node: &name, FromState: audit.Str(string(from)), ToState: audit.Str(string(to)), Reason: reason,
		})
	})
	if err != nil {
		return Node{}, fmt.Errorf("acknowledge node %s: %w", name, err)
	}
	return n, nil
}

// ErrAwaitingAck means Deregister kept the record because it is in Unexpected
// shutdown; only an operator's ack takes a node out of that status, and a
// clean stop is not an ack.
var ErrAwaitingAck = errors.New("nodes: record kept, awaiting an operator ack")

// Deregister deletes this incarnation's record on clean shutdown, with an
// event. A record in Unexpected shutdown is kept (ErrAwaitingAck, with an
// event saying so): deleting it would let the next start register as a new
// node and take office without the ack the operator owes.
func (s *Store) Deregister(ctx context.Context, name, incarnation, reason string) error {
	kept := false
	err := pgdb.InTx(ctx, s.db, func(tx *pgdb.Tx) error {
		var status Status
		err := s.sql.deregisterLock.Get(ctx, tx, &status, sqltext.Args{"name": name, "incarnation": incarnation})
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotRegistered
		}
		if err != nil {
			return err
		}
		if status == StatusUnexpectedShutdown {
			if _, err := s.sql.deregisterKeep.Exec(ctx, tx, sqltext.Args{"name": name}); err != nil {
				return err
			}
			if err := s.events.Write(ctx, tx, audit.Event{
				Kind: audit.KindNodeStatus, Actor: name, Node: &name,
				FromState: audit.Str(string(status)), ToState: audit.Str(string(status)),
				Reason: reason + "; record kept until an operator acks it",
			}); err != nil {
				return err
			}
			kept = true
			return nil
		}
		if _, err := s.sql.deregister.Exec(ctx, tx, sqltext.Args{"name": name}); err != nil {
			return err
		}
		return s.events.Write(ctx, tx, audit.Event{
			Kind: audit.KindNodeDeregistered, Actor: name, Node: &name,
			FromState: audit.Str(string(status)), Reason: reason,
		})
	})
	if err != nil {
		return fmt.Errorf("deregister node %s: %w", name, err)
	}
	if kept {
		return ErrAwaitingAck
	}
	return nil
}

// SetMaster makes the node name (this incarnation) the only one with the
// master flag. Call it in the fenced transaction that takes office
// (leader.Fence.TakeOffice).
func (s *Store) SetMaster(ctx context.Context, tx *leader.Tx, name, incarnation string) error {
	if _, err := s.sql.setMaster.Exec(ctx, tx, sqltext.Args{"name": name, "incarnation": incarnation}); err != nil {
		return fmt.Errorf("set master flag: %w", err)
	}
	return nil
}

// ClearMaster clears the master flag of node name (this incarnation) and
// reports whether it was set. Call it in leader.Fence.StepDown.
func (s *Store) ClearMaster(ctx context.Context, tx sqlx.ExtContext, name, incarnation string) (bool, error) {
	res, err := s.sql.clearMaster.Exec(ctx, tx, sqltext.Args{"name": name, "incarnation": incarnation})
	if err != nil {
		return false, fmt.Errorf("clear master flag: %w", err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// AddressOf returns the API address node name registered in incarnation,
// and false when the node is gone or registered in another incarnation
// (leader.AddressOf).
func (s *Store) AddressOf(ctx context.Context, name, incarnation string) (string, bool, error) {
	n, err := s.Get(ctx, name)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return n.APIAddress, n.Incarnation == incarnation, nil
}

// FleetKnows reports whether every node record names a binary that knows
// schema version v or a later one (a record from before migration 15
// names none): what the master asks before it writes what only such
// binaries read (expand/contract, docs/operations.md).
func (s *Store) FleetKnows(ctx context.Context, v int) (bool, error) {
	var ok bool
	err := s.sql.fleetKnows.Get(ctx, s.db, &ok, sqltext.Args{"version": v})
	return ok, err
}

// List returns every node record by name.
func (s *Store) List(ctx context.Context) ([]Node, error) {
	ns := []Node{}
	if err := s.sql.list.Select(ctx, s.db, &ns, nil); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return ns, nil
}

// Get returns the record of one node, or ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (Node, error) {
	var n Node
	err := s.sql.get.Get(ctx, s.db, &n, sqltext.Args{"name": name})
	if errors.Is(err, sql.ErrNoRows) {
		return Node{}, fmt.Errorf("node %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return Node{}, fmt.Errorf("get node %s: %w", name, err)
	}
	return n, nil
}

// Stale returns the nodes in service (Recovering or Ready) whose
// last_active is older than threshold (database clock), and the number of
// nodes recorded other than those in Unexpected shutdown (Not responding
// ones included: the disruption guard's denominator), inside the caller's
// transaction (rows locked). Nodes in Unexpected shutdown are out of
// service whatever their heartbeats do: only an operator's ack moves
// them, so they are neither stale nor counted.
func (s *Store) Stale(ctx context.Context, tx sqlx.ExtContext, threshold time.Duration) (stale []string, total int, err error) {
	stale = []string{}
	if err := s.sql.stale.Select(ctx, tx, &stale, sqltext.Args{"threshold": threshold.Seconds()}); err != nil {
		return nil, 0, fmt.Errorf("find stale nodes: %w", err)
	}
	if err := s.sql.countNodes.Get(ctx, tx, &total, nil); err != nil {
		return nil, 0, fmt.Errorf("count nodes: %w", err)
	}
	return stale, total, nil
}

// Change is one status change made by the master.
type Change struct {
	Name string `db:"name"`
	From string `db:"from_status"`
	To   string `db:"to_status"`
}

// MasterEvent is the context a master's change is recorded with.
type MasterEvent struct {
	Actor string
	Term  int64
	RunID int64
}

func (s *Store) record(ctx context.Context, tx sqlx.ExtContext, m MasterEvent, kind audit.Kind, cs []Change, reason string) error {
	for _, c := range cs {
		e := audit.Event{Kind: kind, Actor: m.Actor, Term: &m.Term, RunID: &m.RunID, Node: &c.Name,
			FromState: audit.Str(c.From), ToState: audit.Str(c.To), Reason: reason}
		if err := s.events.Write(ctx, tx, e); err != nil {
			return err
		}
	}
	return nil
}

// MarkNotResponding moves the named nodes to Not responding if they are
// still in service and stale (re-checked in the UPDATE), with an event each.
func (s *Store) MarkNotResponding(ctx context.Context, tx *leader.Tx, names []string, threshold time.Duration, m MasterEvent) ([]Change, error) {
	cs := []Change{}
	reason := fmt.Sprintf("%s%s; marked by %s in term %d", noHeartbeat, threshold.Round(100*time.Millisecond), m.Actor, m.Term)
	err := s.sql.markNotResponding.Select(ctx, tx, &cs, sqltext.Args{"names": pq.Array(names), "threshold": threshold.Seconds(),
		"actor": m.Actor, "reason": reason})
	if err != nil {
		return nil, fmt.Errorf("mark nodes not responding: %w", err)
	}
	return cs, s.record(ctx, tx, m, audit.KindNodeStatus, cs, reason)
}

// Revive moves Not responding nodes whose heartbeat is fresh again (within
// threshold) back to Ready, with an event each.
func (s *Store) Revive(ctx context.Context, tx *leader.Tx, threshold time.Duration, m MasterEvent) ([]Change, error) {
	cs := []Change{}
	reason := "heartbeats resumed"
	err := s.sql.revive.Select(ctx, tx, &cs, sqltext.Args{"threshold": threshold.Seconds(), "actor": m.Actor, "reason": reason})
	if err != nil {
		return nil, fmt.Errorf("revive nodes: %w", err)
	}
	return cs, s.record(ctx, tx, m, audit.KindNodeStatus, cs, reason)
}

// Forget deletes the records of nodes Not responding for longer than
// after, with an event each.
func (s *Store) Forget(ctx context.Context, tx *leader.Tx, after time.Duration, m MasterEvent) ([]Change, error) {
	cs := []Change{}
	err := s.sql.forget.Select(ctx, tx, &cs, sqltext.Args{"after": after.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("forget nodes: %w", err)
	}
	return cs, s.record(ctx, tx, m, audit.KindNodeForgotten, cs, fmt.Sprintf("not responding for more than %s", after))
}
