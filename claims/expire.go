package claims

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// Querier runs a statement that returns one row: a *sql.Tx, or the
// master's fenced transaction.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ExpireParams describes one batch of claim expiry by the master.
type ExpireParams struct {
	// Limit of claims deleted by the batch.
	Limit int
	// Record returns a statement that records the expired claims (the
	// caller's audit trail), run in the same statement as the deletion:
	// it reads the relation named expired, one row per deleted claim with
	// the columns instance (text), node, token, claimed_at, expires_at and
	// state (the instance's, NULL if it has no row). Its arguments are numbered from
	// $2 and returned with it.
	Record func(expired string) (stmt string, args []any)
}

// Expire deletes up to p.Limit claims whose expiry has passed (database
// clock) and records each with p.Record, in the caller's (fenced)
// transaction. It returns the instances whose claims it deleted. The expiry
// is re-checked in the DELETE, so a claim renewed meanwhile stays.
func (t Table) Expire(ctx context.Context, tx Querier, p ExpireParams) ([]string, error) {
	record, args := p.Record("expired")
	stmt, err := t.expireStatement(record)
	if err != nil {
		return nil, fmt.Errorf("expire claims of %s: %w", t.Instances, err)
	}
	var ids pq.StringArray
	if err := tx.QueryRowContext(ctx, stmt, append([]any{p.Limit}, args...)...).Scan(&ids); err != nil {
		return nil, fmt.Errorf("expire claims of %s: %w", t.Instances, err)
	}
	return ids, nil
}

// expireSlots fill sql/expire.sql, Expire's statement (every field
// named by the text, and none it names missing: TestGoldenStatements
// checks): the claims table, the instance table, and Record, the
// statement that records the expired claims.
type expireSlots struct {
	claimSlots
	instanceSlots
	Record string
}

func (t Table) expireSlots(record string) expireSlots {
	return expireSlots{claimSlots: t.claimSlots(), instanceSlots: t.instanceSlots(), Record: record}
}

// ExpireStatement returns the text of Expire's statement with the
// statement record (ExpireParams.Record's, over the relation expired),
// for a caller's golden file and plan: its $1 is the limit; record's
// parameters follow.
func (t Table) ExpireStatement(record string) (string, error) { return t.expireStatement(record) }

// expireStatement renders Expire's statement with the statement record.
func (t Table) expireStatement(record string) (string, error) {
	return render("expire", t.expireSlots(record))
}

// CountExpired returns how many claims have expired (for plans).
func (t Table) CountExpired(ctx context.Context, db Querier) (int64, error) {
	var k int64
	if err := db.QueryRowContext(ctx, t.protocol().countExpired.sql).Scan(&k); err != nil {
		return 0, fmt.Errorf("count expired claims: %w", err)
	}
	return k, nil
}

// Unclaimed returns an SQL condition true when the instance row aliased
// alias has no claim row at all (expired claims still protect it until
// Expire removes them).
func (t Table) Unclaimed(alias string) string { return "NOT " + t.Claimed(alias) }

// Claimed returns the SQL condition that the instance row aliased alias
// has a claim row, expired or not: Unclaimed's opposite.
func (t Table) Claimed(alias string) string {
	return `EXISTS (SELECT 1 FROM ` + Ident(t.Claims) + ` c WHERE c.` + Ident(t.InstanceColumn) + ` = ` + alias + `.` + Ident(t.IDColumn) + `)`
}

// HolderSQL returns an SQL expression over the instance row aliased
// alias: who claims it ("node n2 until 2026-11-23T10:04:05Z", the claim
// expired or not), or NULL when no claim row exists.
func (t Table) HolderSQL(alias string) string { return t.holder(alias).sql }

// UnclaimedAfterExpiry is Unclaimed as it will be once expired claims are
// deleted: no claim row, or only an expired one (for plans).
func (t Table) UnclaimedAfterExpiry(alias string) string {
	return `NOT EXISTS (SELECT 1 FROM ` + Ident(t.Claims) + ` c WHERE c.` + Ident(t.InstanceColumn) + ` = ` + alias + `.` + Ident(t.IDColumn) +
		` AND c.` + Ident(t.ExpiresAtColumn) + ` >= now())`
}

// ClaimRow is a claim as the claims table holds it.
type ClaimRow struct {
	Node      string
	Token     string
	ClaimedAt time.Time
	ExpiresAt time.Time
	// Expired reports whether its expiry has passed (database clock); the master
	// deletes it on its next pass.
	Expired bool
}

// Lookup returns the claim on instance id, or nil when there is none.
func (t Table) Lookup(ctx context.Context, db Querier, id string) (*ClaimRow, error) {
	var c ClaimRow
	err := db.QueryRowContext(ctx, t.protocol().lookup.sql, id).Scan(&c.Node, &c.Token, &c.ClaimedAt, &c.ExpiresAt, &c.Expired)
	var pe *pq.Error
	if errors.Is(err, sql.ErrNoRows) || errors.As(err, &pe) && pe.Code.Class() == "22" {
		return nil, nil // none, or an id its column cannot hold
	}
	if err != nil {
		return nil, fmt.Errorf("look up the claim on %s: %w", id, err)
	}
	return &c, nil
}
