package leader

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/enginehealth/enginehealth/internal/audit"
	"github.com/enginehealth/enginehealth/internal/pgdb"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// ErrDeposed: a newer master's term is recorded; this office may not write.
var ErrDeposed = errors.New("leader: deposed: a newer term is recorded")

// Event kinds written by the fence.
const (
	KindMasterElected = "master_elected"
	KindMasterLost    = "master_lost"
)

// Fence records terms and runs term-checked transactions.
type Fence struct {
	db     *sqlx.DB
	terms  string
	events *audit.Log
}

// NewFence returns the fence of a sidecar schema.
func NewFence(db *sqlx.DB, schema string) *Fence {
	s := pq.QuoteIdentifier(schema)
	return &Fence{db: db, terms: s + ".leader_term", events: audit.New(schema)}
}

// Term is the recorded fencing term.
type Term struct {
	Term        int64     `db:"term" json:"term"`
	Node        string    `db:"node" json:"node"`
	Incarnation *string   `db:"incarnation" json:"incarnation,omitempty"`
	Since       time.Time `db:"since" json:"since"`
}

// Current returns the recorded term.
func (f *Fence) Current(ctx context.Context) (Term, error) {
	var t Term
	if err := f.db.GetContext(ctx, &t, `SELECT term, node, incarnation, since FROM `+f.terms); err != nil {
		return Term{}, fmt.Errorf("read leader term: %w", err)
	}
	return t, nil
}

// TakeOffice raises the recorded term to o's (only upwards), runs also
// (the caller's writes that belong to taking office, such as the node
// registry's master flag; nil for none) and writes an event, in one
// transaction. Retrying it for the same office is harmless.
func (f *Fence) TakeOffice(ctx context.Context, o *Office, also func(tx *sqlx.Tx) error) error {
	if err := o.Trusted(); err != nil {
		return err
	}
	c := o.Candidate
	return pgdb.InTx(ctx, f.db, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE `+f.terms+` SET term = $1, node = $2, incarnation = $3, since = now() WHERE term < $1`,
			o.Term, c.Name, c.Incarnation)
		if err != nil {
			return fmt.Errorf("raise term: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			var cur Term
			if err := tx.GetContext(ctx, &cur, `SELECT term, node, incarnation, since FROM `+f.terms+` FOR UPDATE`); err != nil {
				return fmt.Errorf("read term: %w", err)
			}
			if cur.Term != o.Term || cur.Incarnation == nil || *cur.Incarnation != c.Incarnation {
				return fmt.Errorf("%w: term %d recorded by %s, ours is %d (if etcd was rebuilt from scratch, its revisions restarted: see README, The master)",
					ErrDeposed, cur.Term, cur.Node, o.Term)
			}
		}
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		term := o.Term
		return f.events.Write(ctx, tx, audit.Event{
			Kind: KindMasterElected, Actor: c.Name, Term: &term, Node: &c.Name,
			Reason: "took office with term " + strconv.FormatInt(o.Term, 10),
		})
	})
}

// StepDown runs clear (the caller's undoing of what TakeOffice's also
// did; it reports whether anything changed) and, if it changed anything,
// writes an event, in one transaction. It is best effort: a newer
// master's TakeOffice undoes it anyway.
func (f *Fence) StepDown(ctx context.Context, o *Office, reason string, clear func(tx *sqlx.Tx) (bool, error)) error {
	c := o.Candidate
	return pgdb.InTx(ctx, f.db, func(tx *sqlx.Tx) error {
		changed, err := clear(tx)
		if err != nil || !changed {
			return err
		}
		term := o.Term
		return f.events.Write(ctx, tx, audit.Event{Kind: KindMasterLost, Actor: c.Name, Term: &term, Node: &c.Name, Reason: reason})
	})
}

// InTx runs fn in a transaction that holds the leader_term row FOR SHARE
// and has verified that o's term is the recorded one. It fails with
// ErrNotTrusted before starting when the office may not act, and with
// ErrDeposed (writing nothing) when a newer term is recorded. Every master
// write goes through it.
func (f *Fence) InTx(ctx context.Context, o *Office, fn func(tx *sqlx.Tx) error) error {
	if err := o.Trusted(); err != nil {
		return err
	}
	return pgdb.InTx(ctx, f.db, func(tx *sqlx.Tx) error {
		var term int64
		if err := tx.GetContext(ctx, &term, `SELECT term FROM `+f.terms+` FOR SHARE`); err != nil {
			return fmt.Errorf("check term: %w", err)
		}
		if term != o.Term {
			return fmt.Errorf("%w: recorded term %d, ours %d", ErrDeposed, term, o.Term)
		}
		if err := fn(tx); err != nil {
			return err
		}
		// The lease may have been lost while fn ran: do not commit then.
		return o.Trusted()
	})
}
