package health

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/leader"
)

// Pause is the cluster's pause switch (one row of the pause table).
// While paused the master keeps heartbeats, status marking, grades and
// the audit trail, but makes no automatic repair, claim expiry, on_failure
// decision or retry, and defers start-up recovery; an operator's recover,
// retry and hold decisions still work.
type Pause struct {
	Paused bool `db:"paused"`
	// Since is when it was paused (or resumed, when not paused).
	Since time.Time `db:"changed_at"`
	// Actor and Reason of the last pause or resume (empty when none:
	// never paused, a resume without a reason).
	Actor  string `db:"actor"`
	Reason string `db:"reason"`
	// Term of the master that recorded it (nil when never paused).
	Term *int64 `db:"term"`
}

// String says who paused, when and why ("" when not paused).
func (p Pause) String() string {
	if !p.Paused {
		return ""
	}
	return fmt.Sprintf("paused by %s at %s: %s", p.Actor, p.Since.UTC().Format(time.RFC3339), p.Reason)
}

// Errors of Ops.Pause and Ops.Resume.
var (
	ErrPaused    = errors.New("health: paused already")
	ErrNotPaused = errors.New("health: not paused")
)

// Pauses reads and writes the pause switch of one sidecar schema.
type Pauses struct {
	db     *sqlx.DB
	st     statements
	events *audit.Log
}

// PausesConfig configures the pause switch of one sidecar schema.
type PausesConfig struct {
	// DB is the pool Current reads the switch through (required).
	DB *sqlx.DB
	// Schema is the sidecar schema; default pgdb.DefaultSchema.
	Schema string
	// Events records each pause and resume (required).
	Events *audit.Log
}

// NewPauses returns the pause switch of cfg.Schema. It fails without the
// pool or the event log.
func NewPauses(cfg PausesConfig) (*Pauses, error) {
	if cfg.DB == nil || cfg.Events == nil {
		return nil, errors.New("health: a pause switch needs the pool and the event log (PausesConfig.DB, Events)")
	}
	return &Pauses{db: cfg.DB, st: newStatements(cmp.Or(cfg.Schema, pgdb.DefaultSchema)), events: cfg.Events}, nil
}

// Current returns the pause switch as the database has it now.
func (p *Pauses) Current(ctx context.Context) (Pause, error) {
	return p.Read(ctx, p.db)
}

// Read returns the pause switch, read through q.
func (p *Pauses) Read(ctx context.Context, q sqlx.QueryerContext) (Pause, error) {
	var s Pause
	if err := p.st.readPause.Get(ctx, q, &s, nil); err != nil {
		return Pause{}, fmt.Errorf("read pause: %w", err)
	}
	return s, nil
}

// set turns the switch to paused in the master's fenced tx, with an event;
// ErrPaused or ErrNotPaused (wrapped with who and why) when it is there
// already.
func (p *Pauses) set(ctx context.Context, tx *leader.Tx, paused bool, by audit.By, reason string) (Pause, error) {
	var cur Pause
	if err := p.st.lockPause.Get(ctx, tx, &cur, nil); err != nil {
		return Pause{}, fmt.Errorf("read pause: %w", err)
	}
	switch {
	case paused && cur.Paused:
		return cur, fmt.Errorf("%w: %s", ErrPaused, cur)
	case !paused && !cur.Paused:
		return cur, ErrNotPaused
	}
	var s Pause
	args := sqltext.Args{"paused": paused, "actor": by.Actor, "reason": reason, "term": tx.Term}
	if err := p.st.setPause.Get(ctx, tx, &s, args); err != nil {
		return Pause{}, fmt.Errorf("write pause: %w", err)
	}
	kind := audit.KindResumed
	if paused {
		kind = audit.KindPaused
	}
	term := tx.Term
	return s, p.events.Write(ctx, tx, audit.Event{Kind: kind, Actor: by.Actor, Via: audit.Str(by.Via), Term: &term, Reason: reason})
}
