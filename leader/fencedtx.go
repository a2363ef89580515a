package leader

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
)

// Tx is a fenced transaction: it holds the leader_term row FOR SHARE after
// checking that its office's term is the recorded one, so no newer master
// takes office while it runs, and it commits only while the office is
// trusted. Only the Fence makes one (InTx, TakeOffice), for a trusted
// Office: code that writes engine tables or master records takes a *Tx,
// so it cannot be handed a transaction that forgot the fence.
//
// Tx is a sqlx.ExtContext; it has no Commit or Rollback: the fence ends
// it when the function it was given returns.
type Tx struct {
	tx *pgdb.Tx
	// Term of the office that holds the fence.
	Term int64
}

var _ sqlx.ExtContext = (*Tx)(nil)

// AfterCommit runs fn once the transaction has committed (never when it
// rolls back).
func (t *Tx) AfterCommit(fn func()) { t.tx.AfterCommit(fn) }

// DriverName implements sqlx.ExtContext.
func (t *Tx) DriverName() string { return t.tx.DriverName() }

// Rebind implements sqlx.ExtContext.
func (t *Tx) Rebind(q string) string { return t.tx.Rebind(q) }

// BindNamed implements sqlx.ExtContext.
func (t *Tx) BindNamed(q string, arg any) (string, []any, error) { return t.tx.BindNamed(q, arg) }

// ExecContext runs a statement in the transaction.
func (t *Tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, q, args...)
}

// QueryContext runs a query in the transaction.
func (t *Tx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, q, args...)
}

// QueryxContext runs a query in the transaction.
func (t *Tx) QueryxContext(ctx context.Context, q string, args ...any) (*sqlx.Rows, error) {
	return t.tx.QueryxContext(ctx, q, args...)
}

// QueryRowxContext runs a query returning one row in the transaction.
func (t *Tx) QueryRowxContext(ctx context.Context, q string, args ...any) *sqlx.Row {
	return t.tx.QueryRowxContext(ctx, q, args...)
}

// QueryRowContext runs a query returning one row in the transaction.
func (t *Tx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, q, args...)
}

// GetContext scans one row into dest.
func (t *Tx) GetContext(ctx context.Context, dest any, q string, args ...any) error {
	return t.tx.GetContext(ctx, dest, q, args...)
}

// SelectContext scans rows into dest.
func (t *Tx) SelectContext(ctx context.Context, dest any, q string, args ...any) error {
	return t.tx.SelectContext(ctx, dest, q, args...)
}
