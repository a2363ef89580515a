// Package claims is the claim protocol between engines and enginehealth.
//
// A claim is a row "node N works on instance I until T" in the workflow's
// claims table. Engines use Claim, Renew, Finish and Release; the master
// deletes expired claims (Expire). The protocol keeps one invariant: an
// instance under a live claim is never repaired, and a repair is never lost
// to a late engine write.
//
//   - Claim: only from the task's begin state, holding the instance row
//     lock, the claim row and the move to the interim state are one
//     transaction. The claim gets a random token and expires_at =
//     now() + timeout (database clock).
//   - Renew: slides expires_at, only while the claim exists unexpired with
//     the same token. Long tasks renew instead of taking a huge timeout.
//   - Finish: deletes the claim and moves the instance from interim to an
//     end or the failed state in one transaction, only if the claim still
//     exists unexpired with the same token; otherwise ErrClaimLost and
//     nothing is written. An engine whose claim expired can therefore never
//     overwrite the master's repair.
//   - Release: gives the instance back (interim → begin), same condition.
//
// The master repairs only instances in an interim state with no claim row
// at all, and deletes a claim only once it has expired; both re-check their
// predicate in the statement that writes.
package claims

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lib/pq"
)

var (
	// ErrNotClaimable means the instance does not exist, is not in the task's
	// begin state, or is locked by another claimer.
	ErrNotClaimable = errors.New("claims: instance not claimable (not in the begin state, or taken)")
	// ErrAlreadyClaimed means a claim row exists for the instance.
	ErrAlreadyClaimed = errors.New("claims: instance already claimed")
	// ErrNothingToClaim means no instance is in the task's begin state.
	ErrNothingToClaim = errors.New("claims: no instance to claim")
	// ErrClaimLost means the claim expired, was removed, or has another token;
	// nothing was written.
	ErrClaimLost = errors.New("claims: claim lost (expired or taken over); nothing written")
	// ErrBadState means the target state is not an end or the failed state of
	// the task.
	ErrBadState = errors.New("claims: not an end or failed state of the task")
)

// Table describes a claimable workflow: its instance table and its claims
// table. Names may be schema-qualified; they are always quoted.
type Table struct {
	Instances       string
	IDColumn        string
	StatusColumn    string
	Claims          string
	InstanceColumn  string
	NodeColumn      string
	TokenColumn     string
	ClaimedAtColumn string
	ExpiresAtColumn string
}

// Ident quotes a table or column name, optionally schema-qualified
// ("app.orders" → "app"."orders"), each part with the driver's
// pq.QuoteIdentifier, as the daemon's sqltext.Ident does (claims, the
// library engines import, depends on nothing of the daemon).
func Ident(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = pq.QuoteIdentifier(p)
	}
	return strings.Join(parts, ".")
}

// Task is the part of a state task the protocol needs.
type Task struct {
	Name    string
	Begin   string
	Interim string
	Ends    []string
	Failed  string
	// Timeout of a claim (and of each renewal); DefaultTimeout is what
	// the configuration gives a task that names none.
	Timeout time.Duration
}

// DefaultTimeout of a claim.
const DefaultTimeout = 5 * time.Minute

// Claim is a held claim.
type Claim struct {
	Instance  string
	Node      string
	Token     string
	Task      Task
	ExpiresAt time.Time
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// Claim claims instance id for task on behalf of node.
func (t Table) Claim(ctx context.Context, db *sql.DB, id, node string, task Task) (Claim, error) {
	return t.claim(ctx, db, &id, node, task)
}

// ClaimNext claims the instance in the task's begin state with the lowest
// id (oldest first, through the index on (status, id)), skipping rows
// other claimers hold; ErrNothingToClaim when there is none.
func (t Table) ClaimNext(ctx context.Context, db *sql.DB, node string, task Task) (Claim, error) {
	return t.claim(ctx, db, nil, node, task)
}

func (t Table) claim(ctx context.Context, db *sql.DB, id *string, node string, task Task) (Claim, error) {
	st := t.protocol()
	c := Claim{Node: node, Token: newToken(), Task: task}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return Claim{}, fmt.Errorf("claim: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit; an early return reports its own error
	var row *sql.Row
	if id != nil {
		row = tx.QueryRowContext(ctx, st.lockInstance.sql, *id, task.Begin)
	} else {
		row = tx.QueryRowContext(ctx, st.lockNext.sql, task.Begin)
	}
	if err := row.Scan(&c.Instance); errors.Is(err, sql.ErrNoRows) {
		if id == nil {
			return Claim{}, ErrNothingToClaim
		}
		return Claim{}, fmt.Errorf("claim %s: %w", *id, ErrNotClaimable)
	} else if err != nil {
		return Claim{}, fmt.Errorf("claim: lock instance: %w", err)
	}
	err = tx.QueryRowContext(ctx, st.insertClaim.sql, c.Instance, node, c.Token, seconds(task.Timeout)).Scan(&c.ExpiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Claim{}, fmt.Errorf("claim %s: %w", c.Instance, ErrAlreadyClaimed)
	} else if err != nil {
		return Claim{}, fmt.Errorf("claim %s: insert claim: %w", c.Instance, err)
	}
	if _, err := tx.ExecContext(ctx, st.enterInterim.sql, c.Instance, task.Interim); err != nil {
		return Claim{}, fmt.Errorf("claim %s: enter %s: %w", c.Instance, task.Interim, err)
	}
	if err := tx.Commit(); err != nil {
		return Claim{}, fmt.Errorf("claim %s: commit: %w", c.Instance, err)
	}
	return c, nil
}

// Renew slides the claim's expiry to now() + timeout and returns it.
func (t Table) Renew(ctx context.Context, db *sql.DB, c *Claim) error {
	err := db.QueryRowContext(ctx, t.protocol().renew.sql, c.Instance, c.Token, seconds(c.Task.Timeout)).Scan(&c.ExpiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("renew %s: %w", c.Instance, ErrClaimLost)
	}
	if err != nil {
		return fmt.Errorf("renew %s: %w", c.Instance, err)
	}
	return nil
}

// Finish moves the instance to state to (an end state or the failed state
// of the task) and deletes the claim, in one transaction, only while the
// claim is held.
func (t Table) Finish(ctx context.Context, db *sql.DB, c Claim, to string) error {
	if to != c.Task.Failed && !slices.Contains(c.Task.Ends, to) {
		return fmt.Errorf("finish %s in %q: %w", c.Instance, to, ErrBadState)
	}
	return t.end(ctx, db, c, to, "finish")
}

// Release gives the instance back: interim → begin, claim deleted, only
// while the claim is held. For work abandoned before any effect.
func (t Table) Release(ctx context.Context, db *sql.DB, c Claim) error {
	return t.end(ctx, db, c, c.Task.Begin, "release")
}

// ErrStateChanged means the claim was held but the instance had left the
// interim state: the protocol was broken (by hand, or by another writer).
var ErrStateChanged = errors.New("claims: instance left the interim state under a live claim")

func (t Table) end(ctx context.Context, db *sql.DB, c Claim, to, op string) error {
	st := t.protocol()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s %s: begin: %w", op, c.Instance, err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit; an early return reports its own error
	res, err := tx.ExecContext(ctx, st.deleteClaim.sql, c.Instance, c.Token)
	if err != nil {
		return fmt.Errorf("%s %s: delete claim: %w", op, c.Instance, err)
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return fmt.Errorf("%s %s: %w", op, c.Instance, ErrClaimLost)
	}
	res, err = tx.ExecContext(ctx, st.leaveInterim.sql, c.Instance, c.Task.Interim, to)
	if err != nil {
		return fmt.Errorf("%s %s: move to %s: %w", op, c.Instance, to, err)
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return fmt.Errorf("%s %s: %w", op, c.Instance, ErrStateChanged)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s %s: commit: %w", op, c.Instance, err)
	}
	return nil
}
