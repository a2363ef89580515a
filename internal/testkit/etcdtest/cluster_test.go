package etcdtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/testkit"
)

var member string // the etcdmember binary

func TestMain(m *testing.M) {
	testkit.Main(m, func(m *testing.M) int {
		dir, err := os.MkdirTemp("", "ehmember-")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		if member, err = BuildMember(dir); err != nil {
			panic(err)
		}
		return m.Run()
	})
}

// TestClusterFaults: the harness freezes, thaws, kills and restarts member
// processes, and the remaining members elect a new raft leader.
func TestClusterFaults(t *testing.T) {
	c, err := StartCluster(ClusterConfig{Binary: member})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Freeze(); err != nil {
		t.Fatal(err)
	}
	if old.Running() {
		t.Fatal("a frozen member counts as running")
	}
	// The two others elect a leader among themselves.
	var next *Member
	for next == nil || next == old {
		if ctx.Err() != nil {
			t.Fatal("no new raft leader while the old one is frozen")
		}
		next, _ = c.Leader(ctx)
	}
	if err := old.Thaw(); err != nil {
		t.Fatal(err)
	}
	if err := next.Kill(); err != nil {
		t.Fatal(err)
	}
	if next.Running() {
		t.Fatal("a killed member counts as running")
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("two of three members: %v", err)
	}
	if err := next.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}
