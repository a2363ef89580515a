package health

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

func count(t *testing.T, b bundle, q string) int {
	t.Helper()
	var n int
	if err := b.db.Get(&n, q); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPause: while paused a pass marks nodes but expires, repairs and
// retries nothing; the switch survives a new master; after resume the next
// pass catches up.
func TestPause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	register(t, b, "a", 0)
	register(t, b, "b", 0)
	register(t, b, "dead", time.Minute)
	b.db.MustExec(`DELETE FROM app.invoice`)
	b.db.MustExec(`INSERT INTO app.invoice (id, status) VALUES (10, 'Sending'), (12, 'Sending')`)
	b.db.MustExec(`INSERT INTO app.invoice_claim VALUES (10, 'dead', 'tok10', now() - interval '10m', now() - interval '1s')`)

	c := newChecker(b, CheckConfig{NotRespondingAfter: 30 * time.Second})
	c.begin()
	ctx := context.Background()
	if _, err := c.SetPause(ctx, o, false, audit.By{Actor: "op"}, "x"); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("resume of a running cluster: %v, want ErrNotPaused", err)
	}
	p, err := c.SetPause(ctx, o, true, audit.By{Actor: "m (operator)", Via: "n2"}, "schema migration")
	if err != nil || !p.Paused || p.Actor != "m (operator)" || p.Reason != "schema migration" || p.Term == nil || *p.Term != o.Term {
		t.Fatalf("pause: %+v %v", p, err)
	}
	if _, err := c.SetPause(ctx, o, true, audit.By{Actor: "other"}, "again"); !errors.Is(err, ErrPaused) || !strings.Contains(err.Error(), "schema migration") {
		t.Fatalf("second pause: %v, want ErrPaused saying who paused and why", err)
	}

	for pass := range 2 {
		res, err := c.RunOnce(ctx, o, recovery.TriggerPeriodic, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Paused == nil || res.Paused.Reason != "schema migration" || res.Recovery.ClaimsExpired != 0 || res.Recovery.Done() != 0 {
			t.Fatalf("pass %d while paused: %+v", pass, res)
		}
	}
	if got := status(t, b, "dead"); got != nodes.StatusNotResponding {
		t.Fatalf("paused pass did not mark the dead node: %s", got)
	}
	if n := count(t, b, `SELECT count(*) FROM app.invoice_claim`); n != 1 {
		t.Fatalf("paused passes expired the claim: %d left", n)
	}
	if n := count(t, b, `SELECT count(*) FROM app.invoice WHERE status = 'Sending'`); n != 2 {
		t.Fatalf("paused passes repaired instances: %d still Sending", n)
	}

	// A new master reads the switch from the database.
	o2 := takeOffice(t, b, "m2")
	c2 := newChecker(b, CheckConfig{NotRespondingAfter: 30 * time.Second})
	c2.begin()
	res, err := c2.RunOnce(ctx, o2, recovery.TriggerPeriodic, nil)
	if err != nil || res.Paused == nil || res.Recovery.Done() != 0 {
		t.Fatalf("new master's pass: %+v %v, want paused and nothing repaired", res, err)
	}
	if _, err := c.SetPause(ctx, o, false, audit.By{Actor: "m"}, "x"); err == nil {
		t.Fatal("the deposed master resumed")
	}

	p, err = c2.SetPause(ctx, o2, false, audit.By{Actor: "m2 (operator)"}, "migration done")
	if err != nil || p.Paused || p.Reason != "migration done" {
		t.Fatalf("resume: %+v %v", p, err)
	}
	res, err = c2.RunOnce(ctx, o2, recovery.TriggerPeriodic, nil)
	if err != nil || res.Paused != nil || res.Recovery.ClaimsExpired != 1 || res.Recovery.Done() != 2 || !res.Recovery.Sweep {
		t.Fatalf("pass after resume: %+v %v, want the claim expired and both instances repaired in a sweep", res.Recovery, err)
	}
	ps, rs := kinds(t, b, audit.KindPaused), kinds(t, b, audit.KindResumed)
	if len(ps) != 1 || ps[0].Actor != "m (operator)" || ps[0].Via == nil || *ps[0].Via != "n2" || ps[0].Reason != "schema migration" ||
		len(rs) != 1 || rs[0].Actor != "m2 (operator)" || rs[0].Via != nil {
		t.Fatalf("pause events %+v, resume events %+v", ps, rs)
	}
}

// TestPauseWaitsForRunningPass: SetPause takes the pass lock, so a pass
// that already began finishes before the switch turns.
func TestPauseWaitsForRunningPass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	c := newChecker(b, CheckConfig{})
	c.begin()
	c.mu.Lock()
	done := make(chan error, 1)
	go func() {
		_, err := c.SetPause(context.Background(), o, true, audit.By{Actor: "op"}, "x")
		done <- err
	}()
	testkit.Never(t, 200*time.Millisecond, "pause returned while a pass held the lock", func() bool { return len(done) > 0 })
	if n := count(t, b, `SELECT count(*) FROM enginehealth.pause WHERE paused`); n != 0 {
		t.Fatal("paused while a pass was running")
	}
	c.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestForceOverridesGuard: check --force runs one pass through the guard,
// with a guard_override event; the next pass, with the dead nodes marked,
// is not in disruption mode.
func TestForceOverridesGuard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := takeOffice(t, b, "m")
	for _, n := range []string{"x", "y", "z"} {
		register(t, b, n, time.Minute)
	}
	b.db.MustExec(`DELETE FROM app.invoice`)
	b.db.MustExec(`INSERT INTO app.invoice (id, status) VALUES (1000, 'Sending')`)
	b.db.MustExec(`INSERT INTO app.invoice_claim VALUES (1000, 'x', 't', now() - interval '1h', now() - interval '1m')`)
	c := newChecker(b, CheckConfig{NotRespondingAfter: 30 * time.Second})
	c.begin()
	ctx := context.Background()
	res, err := c.RunOnce(ctx, o, recovery.TriggerManual, nil)
	if err != nil || !res.Disruption || !strings.Contains(res.DisruptionReason, "3 of 4 nodes") {
		t.Fatalf("unforced pass: %+v %v, want the guard to hold and say why", res, err)
	}
	res, err = c.RunForced(ctx, o, Override{By: audit.By{Actor: "m (operator)", Via: "n3"}, Reason: "rack 3 lost power"})
	if err != nil || res.Disruption || !res.Forced || len(res.NotResponding) != 3 || res.Recovery.ClaimsExpired != 1 || res.Recovery.Done() != 1 {
		t.Fatalf("forced pass: %+v %v", res, err)
	}
	ov := kinds(t, b, audit.KindGuardOverride)
	if len(ov) != 1 || ov[0].Actor != "m (operator)" || ov[0].Via == nil || *ov[0].Via != "n3" || !strings.Contains(ov[0].Reason, "rack 3 lost power") ||
		!strings.Contains(ov[0].Reason, "x, y, z") || *ov[0].RunID != res.RunID {
		t.Fatalf("guard_override events %+v", ov)
	}
	if c.Disrupted() {
		t.Fatal("still in disruption mode after the forced pass")
	}
	res, err = c.RunOnce(ctx, o, recovery.TriggerPeriodic, nil)
	if err != nil || res.Disruption {
		t.Fatalf("pass after the forced one: %+v %v", res, err)
	}
	// Force without a guard to override writes no override event.
	if _, err := c.RunForced(ctx, o, Override{By: audit.By{Actor: "op"}, Reason: "again"}); err != nil {
		t.Fatal(err)
	}
	if n := len(kinds(t, b, audit.KindGuardOverride)); n != 1 {
		t.Fatalf("%d guard_override events, want 1", n)
	}
	// A forced pass does not override a pause.
	if _, err := c.SetPause(ctx, o, true, audit.By{Actor: "op"}, "hands off"); err != nil {
		t.Fatal(err)
	}
	b.db.MustExec(`INSERT INTO app.invoice (id, status) VALUES (1001, 'Sending')`)
	res, err = c.RunForced(ctx, o, Override{By: audit.By{Actor: "op"}, Reason: "force"})
	if err != nil || res.Paused == nil || res.Recovery.Done() != 0 {
		t.Fatalf("forced pass while paused: %+v %v", res, err)
	}
}
