package pgtest

import (
	"context"
	"database/sql"
	"testing"
	"time"
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
