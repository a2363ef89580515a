package claims

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	_ "github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
)

var pg *pgtest.Server

func TestMain(m *testing.M) {
	testkit.Main(m, func(m *testing.M) int { return pgtest.Main(m, &pg) })
}

// DDL is the claims table layout documented in docs/claim-protocol.md.
const DDL = `
CREATE SCHEMA app;
CREATE TABLE app.invoice (id bigserial PRIMARY KEY, status text NOT NULL);
CREATE INDEX ON app.invoice (status, id);
CREATE TABLE app.invoice_claim (
    instance_id bigint PRIMARY KEY REFERENCES app.invoice (id),
    node        text        NOT NULL,
    token       text        NOT NULL,
    claimed_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX ON app.invoice_claim (expires_at);
`

var table = Table{
	Instances: "app.invoice", IDColumn: "id", StatusColumn: "status",
	Claims: "app.invoice_claim", InstanceColumn: "instance_id", NodeColumn: "node",
	TokenColumn: "token", ClaimedAtColumn: "claimed_at", ExpiresAtColumn: "expires_at",
}

var send = Task{Name: "send", Begin: "Created", Interim: "Sending", Ends: []string{"Sent", "Skipped"}, Failed: "SendFailed", Timeout: time.Minute}

func setup(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("postgres", pg.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(DDL); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO app.invoice (status) VALUES ('Created'), ('Created'), ('Sent')`); err != nil {
		t.Fatal(err)
	}
	return db
}

func status(t *testing.T, db *sql.DB, id string) string {
	t.Helper()
	var s string
	if err := db.QueryRow(`SELECT status FROM app.invoice WHERE id = $1`, id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func claimRows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM app.invoice_claim`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestClaimFinish(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	c, err := table.Claim(ctx, db, "1", "node-a", send)
	if err != nil {
		t.Fatal(err)
	}
	if status(t, db, "1") != "Sending" || claimRows(t, db) != 1 || c.Token == "" {
		t.Fatalf("after claim: %s, %d claims, token %q", status(t, db, "1"), claimRows(t, db), c.Token)
	}
	if _, err := table.Claim(ctx, db, "1", "node-b", send); !errors.Is(err, ErrNotClaimable) {
		t.Fatalf("second claim: %v, want ErrNotClaimable", err)
	}
	if _, err := table.Claim(ctx, db, "3", "node-b", send); !errors.Is(err, ErrNotClaimable) {
		t.Fatalf("claim of an instance not in begin: %v", err)
	}
	if err := table.Finish(ctx, db, c, "Created"); !errors.Is(err, ErrBadState) {
		t.Fatalf("finish into the begin state: %v, want ErrBadState", err)
	}
	if err := table.Finish(ctx, db, c, "Skipped"); err != nil {
		t.Fatal(err)
	}
	if status(t, db, "1") != "Skipped" || claimRows(t, db) != 0 {
		t.Fatalf("after finish: %s, %d claims", status(t, db, "1"), claimRows(t, db))
	}
	if err := table.Finish(ctx, db, c, "Sent"); !errors.Is(err, ErrClaimLost) {
		t.Fatalf("finish twice: %v, want ErrClaimLost", err)
	}
}

func TestExpiredClaimCannotWrite(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	short := send
	short.Timeout = 50 * time.Millisecond
	c, err := table.Claim(ctx, db, "1", "node-a", short)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the claim has expired on the database clock.
	testkit.Eventually(t, 10*time.Second, "the claim expired", func() (bool, error) {
		var expired bool
		err := db.QueryRow(`SELECT expires_at < now() FROM app.invoice_claim WHERE instance_id = 1`).Scan(&expired)
		return expired, err
	})
	for name, op := range map[string]func() error{
		"renew":   func() error { return table.Renew(ctx, db, &c) },
		"finish":  func() error { return table.Finish(ctx, db, c, "Sent") },
		"release": func() error { return table.Release(ctx, db, c) },
	} {
		if err := op(); !errors.Is(err, ErrClaimLost) {
			t.Errorf("%s with an expired claim: %v, want ErrClaimLost", name, err)
		}
	}
	if status(t, db, "1") != "Sending" || claimRows(t, db) != 1 {
		t.Fatalf("an expired claim wrote: %s, %d claims", status(t, db, "1"), claimRows(t, db))
	}
}

func TestRenewSlidesAndWrongTokenLoses(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	c, err := table.Claim(ctx, db, "2", "node-a", send)
	if err != nil {
		t.Fatal(err)
	}
	first := c.ExpiresAt
	c.Task.Timeout = time.Hour
	if err := table.Renew(ctx, db, &c); err != nil {
		t.Fatal(err)
	}
	if c.ExpiresAt.Sub(first) < 50*time.Minute {
		t.Fatalf("renew did not slide the expiry: %s → %s", first, c.ExpiresAt)
	}
	forged := c
	forged.Token = "not-the-token"
	if err := table.Finish(ctx, db, forged, "Sent"); !errors.Is(err, ErrClaimLost) {
		t.Fatalf("finish with a wrong token: %v", err)
	}
	if err := table.Release(ctx, db, c); err != nil {
		t.Fatal(err)
	}
	if status(t, db, "2") != "Created" || claimRows(t, db) != 0 {
		t.Fatalf("after release: %s, %d claims", status(t, db, "2"), claimRows(t, db))
	}
}

func TestClaimNext(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	seen := map[string]bool{}
	for range 2 {
		c, err := table.ClaimNext(ctx, db, "node-a", send)
		if err != nil {
			t.Fatal(err)
		}
		seen[c.Instance] = true
	}
	if len(seen) != 2 {
		t.Fatalf("claimed %v, want two different instances", seen)
	}
	if _, err := table.ClaimNext(ctx, db, "node-a", send); !errors.Is(err, ErrNothingToClaim) {
		t.Fatalf("third ClaimNext: %v, want ErrNothingToClaim", err)
	}
}

// TestPreferred: NORMAL first, then WARNING, then unknown nodes; ERROR
// only when nothing else is left; the candidates' order kept within a
// grade.
func TestPreferred(t *testing.T) {
	g := map[string]string{"a": GradeError, "b": GradeWarning, "c": GradeNormal, "d": GradeNormal, "e": GradeWarning}
	for _, c := range []struct {
		in, want []string
	}{
		{[]string{"a", "b", "c", "d", "e", "x"}, []string{"c", "d", "b", "e", "x"}},
		{[]string{"e", "a", "b"}, []string{"e", "b"}},
		{[]string{"a"}, []string{"a"}},
		{nil, []string{}},
	} {
		got := Preferred(g, c.in)
		if len(got) != len(c.want) || (len(got) > 0 && strings.Join(got, ",") != strings.Join(c.want, ",")) {
			t.Errorf("Preferred(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
