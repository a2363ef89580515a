package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// TestDemo runs the demo's core against freshly built binaries, checks its
// timeline against the database before teardown, and that it leaves no
// process, directory or port behind.
func TestDemo(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin, "github.com/enginehealth/enginehealth/cmd/enginehealth",
		"github.com/enginehealth/enginehealth/cmd/demo-engine")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	var out bytes.Buffer
	inspected := false
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tl, err := Run(ctx, Options{BinDir: bin, Out: &out, Instances: 500, Inspect: func(db *sqlx.DB, tl *Timeline) error {
		inspected = true
		return checkTimeline(db, tl)
	}})
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !inspected {
		t.Fatal("the timeline was not checked against the database")
	}
	for _, want := range []string{"Timeline (from the events table", "took office as master", "went Not responding",
		"of node-", "failover after SIGKILL of the master", "crash to repair",
		"poison order 51 interrupted on", "exhausted after 3 retries", "$ enginehealth holds retry --all", "held for an operator",
		"$ enginehealth events --instance orders/51", "failover grade NORMAL → WARNING", "fails 5% of its tasks on purpose"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// Plurals agree, and a grade the cap held back is not a change.
	for _, bad := range []string{" 1 claims", " 1 instances", " 1 interrupted instances", " 1 shipments", " 1 held shipments",
		"WARNING → WARNING", "ERROR → ERROR", "NORMAL → NORMAL"} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("output says %q", bad)
		}
	}
	// Nothing left behind.
	for _, d := range tl.Dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("directory %s left behind (%v)", d, err)
		}
	}
	for _, pid := range tl.PIDs {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still running", pid)
		}
	}
	if open := tl.Ports(); len(open) > 0 {
		t.Errorf("still listening: %v", open)
	}
	if len(tl.Dirs) != 3 || len(tl.PIDs) != 6 || !strings.HasPrefix(filepath.Base(tl.Dirs[2]), "ehdemo-") {
		t.Errorf("demo resources not all recorded: dirs %v, pids %v", tl.Dirs, tl.PIDs)
	}
}

// checkTimeline compares the printed timeline with the database.
func checkTimeline(db *sqlx.DB, tl *Timeline) error {
	count := func(q string, args ...any) int {
		var n int
		if err := db.Get(&n, q, args...); err != nil {
			panic(err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM enginehealth.events WHERE kind = 'master_elected'`); n != len(tl.Masters) || n < 2 {
		return fmt.Errorf("timeline has %d masters, the database %d (want at least 2)", len(tl.Masters), n)
	}
	var current string
	if err := db.Get(&current, `SELECT node FROM enginehealth.leader_term`); err != nil {
		return err
	}
	if last := tl.Masters[len(tl.Masters)-1].Node; last != current || current != tl.Survivor {
		return fmt.Errorf("last master in the timeline %s, in the database %s, survivor %s", last, current, tl.Survivor)
	}
	if len(tl.Kills) != 2 || !tl.Kills[1].Master {
		return fmt.Errorf("kills %+v", tl.Kills)
	}
	for _, k := range tl.Kills {
		found := false
		for _, n := range tl.NotResponding {
			found = found || n == k.Node
		}
		if !found {
			return fmt.Errorf("killed node %s not in the timeline's Not responding list %v", k.Node, tl.NotResponding)
		}
		if got := count(`SELECT count(*) FROM enginehealth.events WHERE kind = 'claim_expired' AND node = $1`, k.Node); got != tl.ClaimsExpired[k.Node] || got < k.Claims {
			return fmt.Errorf("claims of %s expired: timeline %d, database %d, held at the kill %d", k.Node, tl.ClaimsExpired[k.Node], got, k.Claims)
		}
	}
	total := 0
	for _, n := range tl.Repaired {
		total += n
	}
	if n := count(`SELECT count(*) FROM enginehealth.events WHERE kind = 'instance_repaired'`); n != total {
		return fmt.Errorf("timeline counts %d repairs, the database %d", total, n)
	}
	if n := tl.Repaired["startup: Rendering → RenderFailed"]; n != 30 {
		return fmt.Errorf("start-up recovery failed %d reports, want the 30 left mid-render", n)
	}
	if n := tl.Repaired["periodic: Reserving → Created"]; n < 50 {
		return fmt.Errorf("periodic recovery reverted %d orders, want at least the 50 left mid-reserve", n)
	}
	// The poison order: interrupted, retried 3 times (reserve's policy),
	// then failed for good, each step an event naming the node.
	var poison struct {
		Status  string `db:"status"`
		State   string `db:"state"`
		Attempt int    `db:"attempt"`
		Nodes   int    `db:"nodes"`
	}
	if err := db.Get(&poison, `SELECT o.status, a.state, a.attempt, cardinality(a.nodes) AS nodes FROM demo.orders o
		JOIN enginehealth.attempts a ON a.workflow = 'orders' AND a.instance = o.id::text AND a.task = 'reserve' WHERE o.id = 51`); err != nil {
		return err
	}
	if poison.Status != "ReserveFailed" || poison.State != "exhausted" || poison.Attempt != 3 || poison.Nodes < 1 {
		return fmt.Errorf("poison order: %+v, want ReserveFailed, exhausted after 3 retries", poison)
	}
	if n := count(`SELECT count(*) FROM enginehealth.events WHERE kind = 'instance_repaired' AND instance = '51' AND node IS NOT NULL`); n != 4 || len(tl.Poison) != 4 {
		return fmt.Errorf("poison order: %d repair events naming a node, %d in the timeline, want 4 (3 retries, then exhausted)", n, len(tl.Poison))
	}
	if last := tl.Poison[3]; !strings.Contains(last, "exhausted after 3 retries") || !strings.Contains(last, "→ ReserveFailed") {
		return fmt.Errorf("poison order's last step: %s", last)
	}
	// Holds: the killed nodes' shipments held, released by the operator,
	// shipped since.
	if len(tl.Released) == 0 {
		return fmt.Errorf("no shipment was held")
	}
	if n := count(`SELECT count(*) FROM enginehealth.events WHERE kind = 'hold_decided'`); n != len(tl.Released) {
		return fmt.Errorf("%d hold decisions for %d released holds", n, len(tl.Released))
	}
	if n := count(`SELECT count(*) FROM enginehealth.attempts WHERE state = 'held'`); n != 0 {
		return fmt.Errorf("%d holds still open", n)
	}
	if n := count(`SELECT count(*) FROM demo.orders WHERE id::text = ANY($1) AND status NOT IN ('Shipped', 'ShipFailed')`, pq.Array(tl.Released)); n != 0 {
		return fmt.Errorf("%d released shipments not done", n)
	}
	if n := count(`SELECT count(*) FROM enginehealth.events WHERE kind = 'node_grade'`); n != len(tl.Grades) || n == 0 {
		return fmt.Errorf("timeline has %d grade changes, the database %d (want some: two nodes were killed)", len(tl.Grades), n)
	}
	return nil
}
