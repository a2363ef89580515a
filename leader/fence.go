package leader

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/faultinject"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// ErrDeposed means a newer master's term is recorded: this office may not write.
var ErrDeposed = errors.New("leader: deposed: a newer term is recorded")

// termLost ends an office whose term the database no longer has: it is
// ErrDeposed (the office may not write) for a different reason.
type termLost struct{ recorded, ours int64 }

func (e termLost) Error() string {
	return fmt.Sprintf("leader: the recorded term %d is older than ours (%d): the database lost our term (a failover to a replica that had not received it); the term is taken again at the next election",
		e.recorded, e.ours)
}

func (termLost) Is(target error) bool { return target == ErrDeposed }

// Fence records terms and runs term-checked transactions.
type Fence struct {
	db     *sqlx.DB
	sql    statements // rendered for the schema
	events *audit.Log
	log    *slog.Logger
	onTerm func(recorded int64)
	// cluster, when set, checks inside each fenced transaction that its
	// server belongs to the cluster learnt (FenceConfig.Cluster).
	cluster *pgdb.Cluster
}

// FenceConfig of a Fence.
type FenceConfig struct {
	// DB is the sidecar's pool (required).
	DB *sqlx.DB
	// Schema is the sidecar schema; default pgdb.DefaultSchema.
	Schema string
	// Events is the event log of the same schema (required).
	Events *audit.Log
	// Cluster, when set, makes every fenced transaction check, with its
	// term, that its server belongs to Cluster's PostgreSQL cluster: a
	// master's write never commits on another cluster, even through a
	// pooler that moved its server connections without the sidecar's
	// noticing.
	Cluster *pgdb.Cluster
	// OnTerm, when set, is told of every term Current reads (give it
	// Elector.ObserveTerm: an office of this node that an API lookup
	// finds superseded ends at once). Fenced transactions end their own
	// office.
	OnTerm func(recorded int64)
	// Log is where the fence reports what it does beyond its transactions
	// (ending an earlier master's stalled one); none by default.
	Log *slog.Logger
}

// NewFence returns the fence of a sidecar schema. It fails when cfg lacks
// the pool or the event log.
func NewFence(cfg FenceConfig) (*Fence, error) {
	switch {
	case cfg.DB == nil:
		return nil, errors.New("leader: a fence needs a database pool (FenceConfig.DB)")
	case cfg.Events == nil:
		return nil, errors.New("leader: a fence needs the event log (FenceConfig.Events)")
	}
	log := cmp.Or(cfg.Log, slog.New(slog.DiscardHandler))
	return &Fence{db: cfg.DB, sql: newStatements(cmp.Or(cfg.Schema, pgdb.DefaultSchema)), events: cfg.Events,
		log: log.With("component", "fence"), onTerm: cfg.OnTerm, cluster: cfg.Cluster}, nil
}

// Term is the recorded fencing term.
type Term struct {
	Term        int64     `db:"term"`
	Node        string    `db:"node"`
	Incarnation *string   `db:"incarnation"`
	Since       time.Time `db:"since"`
}

// Current returns the recorded term.
func (f *Fence) Current(ctx context.Context) (Term, error) {
	var t Term
	if err := f.sql.currentTerm.Get(ctx, f.db, &t, nil); err != nil {
		return Term{}, fmt.Errorf("read leader term: %w", err)
	}
	if f.onTerm != nil {
		f.onTerm(t.Term)
	}
	return t, nil
}

// TakeOffice raises the recorded term to o's (only upwards), runs also
// (the caller's writes that belong to taking office, such as the node
// registry's master flag; nil for none) and writes an event, in one
// transaction. Retrying it for the same office is harmless.
//
// It does not wait for the office to act (Office.ActingFrom): recording
// the term fences every earlier master's writes at once. When no term was
// recorded before (this schema never had a master), nobody can still be
// acting, and the office acts at once.
func (f *Fence) TakeOffice(ctx context.Context, o *Office, also func(tx *Tx) error) error {
	if err := o.mayTakeOffice(); err != nil {
		return err
	}
	c := o.Candidate
	first := false
	err := pgdb.InTx(ctx, f.db, func(tx *pgdb.Tx) error {
		previous, res, err := f.raiseTerm(ctx, tx, o)
		if err != nil {
			return fmt.Errorf("raise term: %w", err)
		}
		first = previous == 0
		if n, _ := res.RowsAffected(); n == 0 {
			var cur Term
			if err := f.sql.lockTerm.Get(ctx, tx, &cur, nil); err != nil {
				return fmt.Errorf("read term: %w", err)
			}
			if cur.Term != o.Term || cur.Incarnation == nil || *cur.Incarnation != c.Incarnation {
				err := fmt.Errorf("%w: term %d recorded by %s, ours is %d (if etcd was rebuilt from scratch, its revisions restarted: see docs/operations.md, If etcd is rebuilt from scratch)",
					ErrDeposed, cur.Term, cur.Node, o.Term)
				o.depose(err)
				return err
			}
		}
		if also != nil {
			if err := also(&Tx{tx: tx, Term: o.Term}); err != nil {
				return err
			}
		}
		term := o.Term
		return f.events.Write(ctx, tx, audit.Event{
			Kind: audit.KindMasterElected, Actor: c.Name, Term: &term, Node: &c.Name,
			Reason: "took office with term " + strconv.FormatInt(o.Term, 10),
		})
	})
	if err == nil && first {
		o.actAtOnce()
	}
	return err
}

// staleHolder is how long a transaction that holds the term row must have
// been idle before a new master ends it: a master's fenced transactions
// run their statements back to back, so one idle this long belongs to a
// process that stopped mid-way (SIGSTOP, a VM pause, a hung host).
const staleHolder = 2 * time.Second

// raiseTerm records o's term. A fenced transaction of an earlier office
// holds the term row (FOR SHARE) until it ends; when its process stopped
// mid-way, PostgreSQL would end it only at idle_in_transaction_session_
// timeout (statement_timeout + connect_timeout, 35 s by default). So while
// the UPDATE waits, the transactions that block it and have been idle for
// staleHolder are terminated: their uncommitted writes, of an older term,
// are rolled back, which is what the fence promises anyway.
func (f *Fence) raiseTerm(ctx context.Context, tx *pgdb.Tx, o *Office) (previous int64, _ sql.Result, _ error) {
	var pid int
	if err := tx.GetContext(ctx, &pid, `SELECT pg_backend_pid()`); err != nil {
		return 0, nil, err
	}
	type result struct {
		previous int64
		res      sql.Result
		err      error
	}
	done := make(chan result, 1)
	go func() {
		// The row first, locked: the term recorded before ours, as no
		// other taker can change it any more.
		var r result
		if r.err = f.sql.previousTerm.Get(ctx, tx, &r.previous, nil); r.err == nil {
			r.res, r.err = f.sql.raiseTerm.Exec(ctx, tx, sqltext.Args{"term": o.Term, "node": o.Candidate.Name, "incarnation": o.Candidate.Incarnation})
		}
		done <- r
	}()
	tick := time.NewTicker(staleHolder / 2)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			return r.previous, r.res, r.err
		case <-tick.C:
			var ended []string
			err := f.sql.endStaleHolders.Select(ctx, f.db, &ended, sqltext.Args{"pid": pid, "idle": staleHolder.Seconds()})
			if err == nil && len(ended) > 0 {
				f.log.WarnContext(ctx, "ended the stalled transactions of an earlier master that held the term", "sessions", ended, "term", o.Term)
			}
		}
	}
}

// StepDown runs undo (the caller's undoing of what TakeOffice's also
// did; it reports whether anything changed) and, if it changed anything,
// writes an event, in one transaction. It is best effort: a newer
// master's TakeOffice undoes it anyway.
func (f *Fence) StepDown(ctx context.Context, o *Office, reason string, undo func(tx *pgdb.Tx) (bool, error)) error {
	c := o.Candidate
	return pgdb.InTx(ctx, f.db, func(tx *pgdb.Tx) error {
		changed, err := undo(tx)
		if err != nil || !changed {
			return err
		}
		term := o.Term
		return f.events.Write(ctx, tx, audit.Event{Kind: audit.KindMasterLost, Actor: c.Name, Term: &term, Node: &c.Name, Reason: reason})
	})
}

// InTx runs fn in a transaction that holds the leader_term row FOR SHARE
// and has verified that o's term is the recorded one. It fails with
// ErrNotTrusted before starting when the office may not act, and with
// ErrDeposed (writing nothing) when a newer term is recorded. Every master
// write goes through it.
func (f *Fence) InTx(ctx context.Context, o *Office, fn func(tx *Tx) error) error {
	if err := o.Trusted(); err != nil {
		return err
	}
	return pgdb.InTx(ctx, f.db, func(tx *pgdb.Tx) error {
		var row struct {
			Term    int64 `db:"term"`
			Cluster int64 `db:"cluster"`
		}
		if err := f.sql.checkTerm.Get(ctx, tx, &row, nil); err != nil {
			return fmt.Errorf("check term: %w", err)
		}
		if err := f.cluster.Match(ctx, row.Cluster); err != nil {
			return fmt.Errorf("check term: %w", err)
		}
		term := row.Term
		if term != o.Term && !faultinject.Off(faultinject.Fencing) {
			// Another office took over: this one ends now, not when etcd
			// or its trust window says so.
			err := fmt.Errorf("%w: recorded term %d, ours %d", ErrDeposed, term, o.Term)
			if term < o.Term {
				// Our own term is gone from the database: it failed over
				// to a replica that had not received it (asynchronous
				// replication). The office ends all the same (a round
				// without the term written would not be fenced), and
				// the next election records a term again.
				err = termLost{recorded: term, ours: o.Term}
			}
			o.depose(err)
			return err
		}
		if err := fn(&Tx{tx: tx, Term: o.Term}); err != nil {
			return err
		}
		// The lease may have been lost while fn ran: do not commit then.
		return o.Trusted()
	})
}
