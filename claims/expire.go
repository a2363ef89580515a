package claims

import (
	"context"
	"database/sql"
	"fmt"
)

// KindExpired is the event kind of an expired claim.
const KindExpired = "claim_expired"

// ExpireParams describes one batch of claim expiry by the master.
type ExpireParams struct {
	// Events is the quoted, schema-qualified events table.
	Events   string
	Actor    string
	Term     int64
	RunID    int64
	Workflow string
	// Limit of claims deleted by the batch.
	Limit int
}

// Expire deletes up to p.Limit claims whose expiry has passed (database
// clock), each with a claim_expired event naming the node that held it, its
// token and the instance's state, in the caller's (fenced) transaction. It
// returns how many it deleted. The expiry is re-checked in the DELETE, so a
// claim renewed meanwhile stays.
func (t Table) Expire(ctx context.Context, tx *sql.Tx, p ExpireParams) (int, error) {
	n := t.q()
	stmt := fmt.Sprintf(`WITH gone AS (
			DELETE FROM %[1]s AS c
			WHERE c.ctid IN (SELECT ctid FROM %[1]s WHERE %[5]s < now() LIMIT $1 FOR UPDATE SKIP LOCKED)
			  AND c.%[5]s < now()
			RETURNING c.%[2]s AS inst, c.%[3]s::text AS node, c.%[4]s::text AS token, c.%[5]s AS expires_at
		), ev AS (
			INSERT INTO %[6]s (kind, actor, term, run_id, node, workflow, instance, from_state, reason)
			SELECT $2, $3, $4, $5, g.node, $6, g.inst::text, i.%[9]s,
			       'claim ' || g.token || ' of node ' || g.node || ' expired at ' || g.expires_at
			FROM gone g LEFT JOIN %[7]s i ON i.%[8]s = g.inst
			RETURNING 1
		)
		SELECT count(*) FROM ev`, n.cl, n.ci, n.cn, n.ct, n.ce, p.Events, n.inst, n.id, n.st)
	var k int
	if err := tx.QueryRowContext(ctx, stmt, p.Limit, KindExpired, p.Actor, p.Term, p.RunID, p.Workflow).Scan(&k); err != nil {
		return 0, fmt.Errorf("expire claims of %s: %w", p.Workflow, err)
	}
	return k, nil
}

// CountExpired returns how many claims have expired (for plans).
func (t Table) CountExpired(ctx context.Context, db *sql.DB) (int64, error) {
	n := t.q()
	var k int64
	if err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s < now()`, n.cl, n.ce)).Scan(&k); err != nil {
		return 0, fmt.Errorf("count expired claims: %w", err)
	}
	return k, nil
}

// Unclaimed returns an SQL condition true when the instance row aliased
// alias has no claim row at all (expired claims still protect it until
// Expire removes them).
func (t Table) Unclaimed(alias string) string {
	n := t.q()
	return fmt.Sprintf(`NOT EXISTS (SELECT 1 FROM %s c WHERE c.%s = %s.%s)`, n.cl, n.ci, alias, n.id)
}

// UnclaimedAfterExpiry is Unclaimed as it will be once expired claims are
// deleted: no claim row, or only an expired one (for plans).
func (t Table) UnclaimedAfterExpiry(alias string) string {
	n := t.q()
	return fmt.Sprintf(`NOT EXISTS (SELECT 1 FROM %s c WHERE c.%s = %s.%s AND c.%s >= now())`, n.cl, n.ci, alias, n.id, n.ce)
}
