// Package leadertest gives tests a real master: a shared PostgreSQL server
// and etcd member per test package, and a node elected through a real
// leader.Elector.
package leadertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
)

// Quiet discards logs.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Main runs a test package with a shared PostgreSQL server in *pg and an
// etcd member in *etcd. Call it from TestMain.
func Main(m *testing.M, pg **pgtest.Server, etcd **etcdtest.Etcd) int {
	e, err := etcdtest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "leadertest:", err)
		return 1
	}
	defer e.Close()
	*etcd = e
	return pgtest.Main(m, pg)
}

// Office registers node name in the sidecar schema of db, elects it through
// a real elector on etcd at endpoint (under a prefix of its own), takes
// office, waits until the office acts (a schema that had a master before
// waits out its trust window: leader.Office.ActingFrom), and returns the
// office, held until the test ends.
func Office(t testing.TB, db *sqlx.DB, endpoint, schema, name string) *leader.Office {
	t.Helper()
	inc := uuid.NewString()
	store, err := nodes.NewStore(nodes.StoreConfig{DB: db, Schema: schema, Events: audit.New(schema)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Register(context.Background(), nodes.Registration{Name: name, Incarnation: inc, Hostname: name}); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	fence, err := leader.NewFence(leader.FenceConfig{DB: db, Schema: schema, Events: audit.New(schema)})
	if err != nil {
		t.Fatal(err)
	}
	el, err := leader.New(leader.Config{Client: cli, Prefix: "/" + uuid.NewString() + "/", TTL: 3 * time.Second, TrustMargin: time.Second,
		Candidate: leader.Candidate{Name: name, Incarnation: inc}, Log: Quiet})
	if err != nil {
		t.Fatal(err)
	}
	offices := make(chan *leader.Office, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = el.Run(ctx, func(ctx context.Context, o *leader.Office) error {
			setMaster := func(tx *leader.Tx) error {
				return store.SetMaster(ctx, tx, o.Candidate.Name, o.Candidate.Incarnation)
			}
			if err := fence.TakeOffice(ctx, o, setMaster); err != nil {
				return err
			}
			offices <- o
			<-ctx.Done()
			// One office per call: once it ends (deposed by a test's
			// newer office), the elector does not campaign again, which
			// would take a newer term and depose that one in turn.
			cancel()
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done; _ = cli.Close() })
	select {
	case o := <-offices:
		if wait := time.Until(o.ActingFrom()); wait > 0 {
			<-time.After(wait)
		}
		if err := o.Trusted(); err != nil {
			t.Fatalf("leadertest: the office does not act: %v", err)
		}
		return o
	case <-time.After(15 * time.Second):
		t.Fatal("leadertest: no office within 15s")
		return nil
	}
}
