package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
)

func query(t *testing.T, url string) error {
	t.Helper()
	db, err := sql.Open("postgres", url)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var one int
	return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

func TestServerLifecycle(t *testing.T) {
	s := New(t)
	url := s.NewDatabase(t)
	if err := query(t, url); err != nil {
		t.Fatalf("fresh database: %v", err)
	}
	s.Stop()
	if err := query(t, url); err == nil {
		t.Fatal("query succeeded against a stopped server")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := query(t, url); err != nil {
		t.Fatalf("after resume: %v", err)
	}
}

// TestStandbyPromote: a standby replicates, refuses writes, and accepts
// them once promoted; a standby cut off from its primary misses what was
// written meanwhile.
func TestStandbyPromote(t *testing.T) {
	p := New(t)
	url := p.URL("postgres") // not a database of its own: it is not dropped from a killed server
	exec := func(url, stmt string) error {
		db, err := sql.Open("postgres", url)
		if err != nil {
			return err
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = db.ExecContext(ctx, stmt)
		return err
	}
	if err := exec(url, `CREATE TABLE t (v int); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	r, err := p.StartStandby(p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if in, err := r.InRecovery(); err != nil || !in {
		t.Fatalf("standby in recovery: %v, %v", in, err)
	}
	if err := exec(url, `INSERT INTO t VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.WaitReplayed(ctx, p); err != nil {
		t.Fatal(err)
	}
	rurl := strings.Replace(url, fmt.Sprintf(":%d/", p.Port), fmt.Sprintf(":%d/", r.Port), 1)
	err = exec(rurl, `INSERT INTO t VALUES (3)`)
	if pqErr := (*pq.Error)(nil); !errors.As(err, &pqErr) || pqErr.Code != "25006" {
		t.Fatalf("write on a standby: %v, want SQLSTATE 25006 (read_only_sql_transaction)", err)
	}
	p.Kill()
	if err := r.Promote(); err != nil {
		t.Fatal(err)
	}
	if err := exec(rurl, `INSERT INTO t VALUES (3)`); err != nil {
		t.Fatalf("write after promotion: %v", err)
	}
	db, err := sql.Open("postgres", rurl)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("rows on the promoted standby: %d, %v; want 3", n, err)
	}
}

// TestMigratedDBsAreCopies: MigratedDB's databases are copies of one
// migrated template: each holds every migration, and a write to one is in
// no other, nor in those copied after it.
func TestMigratedDBsAreCopies(t *testing.T) {
	s := New(t)
	ms, err := pgdb.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	newest := ms[len(ms)-1].Version
	first, second := s.MigratedDB(t), s.MigratedDB(t)
	first.MustExec(`DELETE FROM enginehealth.schema_migrations WHERE version = $1`, newest)
	for i, db := range []*sqlx.DB{first, second, s.MigratedDB(t)} {
		var v int
		if err := db.Get(&v, `SELECT max(version) FROM enginehealth.schema_migrations`); err != nil {
			t.Fatal(err)
		}
		want := newest
		if i == 0 {
			want = ms[len(ms)-2].Version
		}
		if v != want {
			t.Fatalf("migrated database %d at version %d, want %d", i, v, want)
		}
	}
}
