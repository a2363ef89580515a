package claims

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
)

// FuzzClaims drives the claims API with whatever instance id, node name
// and target state the fuzzer makes, against a real PostgreSQL: Claim,
// then Finish, Release or Renew and Finish. Whatever the input: no panic;
// a claim taken is stored with the node name as given and its instance in
// the interim state; a Finish into a state that is not an end or the
// failed state is ErrBadState and changes nothing; and the protocol's
// invariant holds after every step: an instance is in the interim state
// exactly when it has a claim row. Names are bound parameters, never SQL.
func FuzzClaims(f *testing.F) {
	db, err := sql.Open("postgres", pg.NewDatabase(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	if _, err := db.Exec(DDL); err != nil {
		f.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO app.invoice (status) VALUES ('Created'), ('Created'), ('Sent')`); err != nil {
		f.Fatal(err)
	}
	for _, s := range []struct {
		id, node, to string
		op           uint8
	}{
		{"1", "node-a", "Sent", 0},
		{"2", "node-b", "Skipped", 1},
		{"1", "node-a", "SendFailed", 2},
		{"3", "node-a", "Sent", 0},
		{"9", "node-a", "Sent", 0},
		{"1", `x"; DROP TABLE app.invoice; --`, `Sent'; DELETE FROM app.invoice_claim; --`, 0},
		{"1 OR 1=1", "node-a", "Sent", 0},
		{"01", "node\x00a", "Created", 0},
		{"-1", "\xff\xfe", "Sending", 2},
	} {
		f.Add(s.id, s.node, s.to, s.op)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, id, node, to string, op uint8) {
		if _, err := db.Exec(`DELETE FROM app.invoice_claim; UPDATE app.invoice SET status = CASE WHEN id = 3 THEN 'Sent' ELSE 'Created' END`); err != nil {
			t.Fatal(err)
		}
		c, err := table.Claim(ctx, db, id, node, send)
		invariant(t, db)
		if err != nil {
			return
		}
		var stored, st string
		if err := db.QueryRow(`SELECT c.node, i.status FROM app.invoice_claim c JOIN app.invoice i ON i.id = c.instance_id
			WHERE c.instance_id::text = $1`, c.Instance).Scan(&stored, &st); err != nil {
			t.Fatalf("claim of %q taken but not stored: %v", id, err)
		}
		if stored != node || st != send.Interim {
			t.Fatalf("claim of %q by %q: stored node %q, instance in %s", id, node, stored, st)
		}
		switch op % 3 {
		case 0:
			err = table.Finish(ctx, db, c, to)
			if valid := to == send.Failed || slices.Contains(send.Ends, to); !valid && !errors.Is(err, ErrBadState) {
				t.Fatalf("finish into %q: %v, want ErrBadState", to, err)
			}
		case 1:
			_ = table.Release(ctx, db, c) // whatever it answers, the invariant below must hold
		case 2:
			if err := table.Renew(ctx, db, &c); err == nil {
				_ = table.Finish(ctx, db, c, "Sent") // as Release
			}
		}
		invariant(t, db)
	})
}

// invariant: an instance is in the interim state exactly when it has a
// claim row.
func invariant(t *testing.T, db *sql.DB) {
	t.Helper()
	var bad int
	if err := db.QueryRow(`SELECT count(*) FROM app.invoice i
		WHERE (i.status = 'Sending') <> EXISTS (SELECT 1 FROM app.invoice_claim c WHERE c.instance_id = i.id)`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad > 0 {
		t.Fatalf("%d instances break the protocol (interim without a claim, or a claim without interim)", bad)
	}
}
