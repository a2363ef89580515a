package health

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// gradeRig is a master with a checker and nodes whose claims can be made
// to expire, one check pass at a time.
type gradeRig struct {
	t testing.TB
	b bundle
	o *leader.Office
	c *Checker
}

func newGradeRig(t testing.TB, g nodes.GradeConfig, names ...string) gradeRig {
	t.Helper()
	b := setup(t)
	b.db.MustExec(`DELETE FROM app.invoice`)
	o := takeOffice(t, b, "m")
	for _, n := range names {
		register(t, b, n, 0)
	}
	c := newChecker(b, CheckConfig{Grades: &g})
	c.begin()
	return gradeRig{t: t, b: b, o: o, c: c}
}

// interrupt leaves instance id in Sending with node's claim expired, as
// an engine that died mid-task does.
func (r gradeRig) interrupt(node string, id int) {
	r.t.Helper()
	r.b.db.MustExec(`INSERT INTO app.invoice (id, status) VALUES ($1, 'Sending')
		ON CONFLICT (id) DO UPDATE SET status = 'Sending'`, id)
	r.b.db.MustExec(`INSERT INTO app.invoice_claim VALUES ($1, $2, 'tok', now() - interval '10m', now() - interval '1s')`, id, node)
}

// pass runs one check pass and returns its grade changes.
func (r gradeRig) pass() []nodes.GradeChange {
	r.t.Helper()
	res, err := r.c.RunOnce(context.Background(), r.o, recovery.TriggerPeriodic, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return res.Grades
}

func (r gradeRig) grade(name string) nodes.Node {
	r.t.Helper()
	n, err := r.b.nodes.Get(context.Background(), name)
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

func (r gradeRig) wantGrade(name, grade string) {
	r.t.Helper()
	if g := r.grade(name).FailoverGrade; g != grade {
		r.t.Fatalf("grade of %s: %s, want %s", name, g, grade)
	}
}

// age moves node's grade history back by d (as if d had passed).
func (r gradeRig) age(name string, d time.Duration) {
	r.t.Helper()
	r.b.db.MustExec(`UPDATE enginehealth.node_grades SET changed_at = changed_at - make_interval(secs => $2),
		last_interruption_at = last_interruption_at - make_interval(secs => $2) WHERE node = $1`, name, d.Seconds())
	r.b.db.MustExec(`UPDATE enginehealth.interruptions SET at = at - make_interval(secs => $2) WHERE node = $1`, name, d.Seconds())
}

var defaultGrades = nodes.GradeConfig{Window: time.Hour, QuietPeriod: time.Hour, MaxErrorFraction: nodes.DefaultMaxErrorFraction}

// TestGradeTransitions: NORMAL → WARNING on an interruption, the same
// signature again keeps WARNING, another within the window → ERROR, and
// the quiet period brings the node back to NORMAL; each change is an event
// with its signature.
func TestGradeTransitions(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n1", "n2", "n3")
	r.wantGrade("n1", nodes.GradeNormal)

	r.interrupt("n1", 100)
	ch := r.pass()
	if len(ch) != 1 || ch[0].Name != "n1" || ch[0].From != nodes.GradeNormal || ch[0].To != nodes.GradeWarning ||
		ch[0].Signature == nil || ch[0].Signature.String() != "invoice/send/100" {
		t.Fatalf("first interruption: %+v", ch)
	}
	n := r.grade("n1")
	if n.FailoverGrade != nodes.GradeWarning || n.GradeSignature != "invoice/send/100" || n.GradeChangedAt == nil ||
		!strings.Contains(n.GradeReason, "claim of n1 on invoice/send/100 expired") {
		t.Fatalf("node record after the first interruption: %+v", n)
	}
	ev := kinds(t, r.b, audit.KindNodeGrade)
	if len(ev) != 1 || *ev[0].Node != "n1" || *ev[0].FromState != nodes.GradeNormal || *ev[0].ToState != nodes.GradeWarning ||
		*ev[0].Workflow != "invoice" || *ev[0].Task != "send" || *ev[0].Instance != "100" || ev[0].RunID == nil || *ev[0].Term != r.o.Term {
		t.Fatalf("grade events %+v", ev)
	}
	r.wantGrade("n2", nodes.GradeNormal)

	// The same work interrupted again on the same node: its attempts
	// count, the grade stays.
	r.interrupt("n1", 100)
	if ch := r.pass(); len(ch) != 0 {
		t.Fatalf("same signature again changed grades: %+v", ch)
	}
	r.wantGrade("n1", nodes.GradeWarning)

	// Other work within the window: ERROR.
	r.interrupt("n1", 101)
	ch = r.pass()
	if len(ch) != 1 || ch[0].To != nodes.GradeError || ch[0].Signature.Instance != "101" ||
		!strings.Contains(ch[0].Reason, "second interruption within failover.window") {
		t.Fatalf("second interruption: %+v", ch)
	}
	r.wantGrade("n1", nodes.GradeError)

	// A pass with nothing new changes nothing; an hour later the node is
	// NORMAL again.
	if ch := r.pass(); len(ch) != 0 {
		t.Fatalf("quiet pass changed grades: %+v", ch)
	}
	r.age("n1", 61*time.Minute)
	ch = r.pass()
	if len(ch) != 1 || ch[0].From != nodes.GradeError || ch[0].To != nodes.GradeNormal || !strings.Contains(ch[0].Reason, "quiet_period") {
		t.Fatalf("after the quiet period: %+v", ch)
	}
	r.wantGrade("n1", nodes.GradeNormal)
	if ev := kinds(t, r.b, audit.KindNodeGrade); len(ev) != 3 {
		t.Fatalf("want 3 grade events, got %+v", ev)
	}
}

// TestGradeWindow: a second interruption more than the window after the
// first keeps the node WARNING (for the new signature); one within it
// raises it.
func TestGradeWindow(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, nodes.GradeConfig{Window: 10 * time.Minute, QuietPeriod: time.Hour, MaxErrorFraction: 0.5}, "n1", "n2", "n3")
	r.interrupt("n1", 100)
	r.pass()
	r.age("n1", 20*time.Minute)
	r.interrupt("n1", 101)
	ch := r.pass()
	if len(ch) != 1 || ch[0].From != nodes.GradeWarning || ch[0].To != nodes.GradeWarning || ch[0].Signature.Instance != "101" ||
		!strings.Contains(ch[0].Reason, "more than failover.window") {
		t.Fatalf("interruption after the window: %+v", ch)
	}
	r.interrupt("n1", 102)
	if ch := r.pass(); len(ch) != 1 || ch[0].To != nodes.GradeError {
		t.Fatalf("interruption within the window: %+v", ch)
	}
}

// TestGradeSameSignatureOnTwoNodes: work interrupted on two nodes is the
// instance's problem: the second node does not rise, and the WARNING the
// first got for it is withdrawn.
func TestGradeSameSignatureOnTwoNodes(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n1", "n2", "n3")
	r.interrupt("n1", 100)
	r.pass()
	r.wantGrade("n1", nodes.GradeWarning)
	r.interrupt("n2", 100)
	ch := r.pass()
	if len(ch) != 1 || ch[0].Name != "n1" || ch[0].To != nodes.GradeNormal || !strings.Contains(ch[0].Reason, "the instance is the problem") {
		t.Fatalf("same signature on a second node: %+v", ch)
	}
	r.wantGrade("n1", nodes.GradeNormal)
	r.wantGrade("n2", nodes.GradeNormal)
	// A third node: nothing rises either.
	r.interrupt("n3", 100)
	if ch := r.pass(); len(ch) != 0 {
		t.Fatalf("third node: %+v", ch)
	}
	r.wantGrade("n3", nodes.GradeNormal)
	// Each node's other work still counts: n2's own interruption raises it.
	r.interrupt("n2", 200)
	if ch := r.pass(); len(ch) != 1 || ch[0].Name != "n2" || ch[0].To != nodes.GradeWarning {
		t.Fatalf("n2's own interruption: %+v", ch)
	}
}

// TestGradeErrorTakenBackForPoison: an ERROR earned by two interruptions,
// one of them on work that then fails on another node too, goes down to
// the WARNING the node's own interruption justifies.
func TestGradeErrorTakenBackForPoison(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n1", "n2", "n3")
	r.interrupt("n1", 100) // the poison, first on n1
	r.interrupt("n1", 101) // n1's own trouble
	r.pass()
	r.wantGrade("n1", nodes.GradeError)
	r.interrupt("n2", 100)
	ch := r.pass()
	if len(ch) != 1 || ch[0].Name != "n1" || ch[0].From != nodes.GradeError || ch[0].To != nodes.GradeWarning ||
		ch[0].Signature.Instance != "101" || !strings.Contains(ch[0].Reason, "the instance is the problem") {
		t.Fatalf("poison found on a second node: %+v", ch)
	}
	r.wantGrade("n2", nodes.GradeNormal)
	// An ERROR on two signatures of its own stays when other work is
	// found to be poison.
	r.interrupt("n3", 300)
	r.interrupt("n3", 301)
	r.pass()
	r.wantGrade("n3", nodes.GradeError)
	for _, n := range []string{"n2", "n3", "n1"} {
		r.interrupt(n, 999)
		r.pass()
	}
	r.wantGrade("n3", nodes.GradeError)
}

// TestGradeFinishedElsewhere: the work of a WARNING node that another node
// then finished makes it ERROR (the work was fine, the node was not); work
// the node finished itself does not.
func TestGradeFinishedElsewhere(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n1", "n2", "n3", "n4")
	ctx := context.Background()
	tbl := *workflows[1].Claims
	task := workflows[1].Tasks[0].Task
	task.Timeout = time.Hour
	db := r.b.db.DB
	// run is an engine on node picking instance id up from begin; finish
	// ends it.
	run := func(node string, id int) claims.Claim {
		t.Helper()
		r.b.db.MustExec(`UPDATE app.invoice SET status = 'Created' WHERE id = $1`, id)
		c, err := tbl.Claim(ctx, db, strconv.Itoa(id), node, task)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	finish := func(c claims.Claim) {
		t.Helper()
		if err := tbl.Finish(ctx, db, c, "Sent"); err != nil {
			t.Fatal(err)
		}
	}

	// n1's work 100, seen claimed by n2, finished there: n1 is ERROR.
	r.interrupt("n1", 100)
	r.pass()
	c := run("n2", 100)
	if ch := r.pass(); len(ch) != 0 {
		t.Fatalf("claim seen: %+v", ch)
	}
	finish(c)
	ch := r.pass()
	if len(ch) != 1 || ch[0].Name != "n1" || ch[0].To != nodes.GradeError || !strings.Contains(ch[0].Reason, "reached Sent on n2") {
		t.Fatalf("finished on n2: %+v", ch)
	}

	// n3's work 300 finished by n3 itself: it stays WARNING, and the
	// watch ends.
	r.interrupt("n3", 300)
	r.pass()
	c = run("n3", 300)
	r.pass()
	finish(c)
	if ch := r.pass(); len(ch) != 0 {
		t.Fatalf("finished on the same node: %+v", ch)
	}
	r.wantGrade("n3", nodes.GradeWarning)

	// n4's work 400 finished between two passes (no claim seen) while n4
	// has not heartbeated since: it can only have finished elsewhere. But
	// n1 is ERROR already and 0.34 of 5 nodes allows one: n4 stays
	// WARNING, and says why.
	r.interrupt("n4", 400)
	r.pass()
	r.b.db.MustExec(`UPDATE enginehealth.nodes SET last_active = now() - interval '1h' WHERE name = 'n4'`)
	finish(run("n2", 400))
	ch = r.pass()
	if len(ch) != 1 || ch[0].Name != "n4" || ch[0].To != nodes.GradeWarning ||
		!strings.Contains(ch[0].Reason, "has not heartbeated since") || !strings.Contains(ch[0].Reason, "1 of 5 nodes are ERROR already") {
		t.Fatalf("finished elsewhere, capped: %+v", ch)
	}
	// Once n1 is reset, the next such case may be ERROR.
	if _, err := r.b.nodes.ResetGrade(ctx, "n1", audit.By{Actor: "op"}, "host replaced"); err != nil {
		t.Fatal(err)
	}
	r.interrupt("n4", 401)
	if ch := r.pass(); len(ch) != 1 || ch[0].Name != "n4" || ch[0].To != nodes.GradeError {
		t.Fatalf("n4 after n1's reset: %+v", ch)
	}
}

// TestGradeCap: never more than max_error_fraction of the nodes ERROR.
func TestGradeCap(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n1", "n2") // with m: 3 nodes, one may be ERROR
	for i, n := range []string{"n1", "n2"} {
		r.interrupt(n, 100+10*i)
		r.interrupt(n, 101+10*i)
	}
	ch := r.pass()
	got := map[string]string{}
	for _, c := range ch {
		got[c.Name] = c.To
	}
	if got["n1"] != nodes.GradeError || got["n2"] != nodes.GradeWarning {
		t.Fatalf("two nodes with two interruptions each, 3 nodes, cap 0.34: %+v", ch)
	}
	if last := ch[len(ch)-1]; !strings.Contains(last.Reason, "kept at WARNING") {
		t.Fatalf("capped change does not say why: %+v", last)
	}
	r.wantGrade("n2", nodes.GradeWarning)
	// More interruptions of n2 while the cap holds it: its grade does not
	// change, so no more grade events (a poison instance would otherwise
	// write one per interruption).
	before := len(kinds(t, r.b, audit.KindNodeGrade))
	for i := range 3 {
		r.interrupt("n2", 120+i)
		if ch := r.pass(); len(ch) != 0 {
			t.Fatalf("capped node interrupted again: %+v", ch)
		}
	}
	if after := len(kinds(t, r.b, audit.KindNodeGrade)); after != before {
		t.Fatalf("%d grade events for interruptions that changed no grade", after-before)
	}
	r.wantGrade("n2", nodes.GradeWarning)
}

// TestGradeNoRiseInDisruption: while most nodes look dead, nothing is
// graded; the pending interruptions are graded once the guard lifts.
func TestGradeNoRiseInDisruption(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n1")
	for _, n := range []string{"x", "y", "z"} {
		register(t, r.b, n, time.Minute)
	}
	r.interrupt("x", 100)
	// An interruption recorded by an earlier pass, not graded yet.
	r.b.db.MustExec(`INSERT INTO enginehealth.interruptions (run_id, node, workflow, task, instance) VALUES (1, 'n1', 'invoice', 'send', '7')`)
	res, err := r.c.RunOnce(context.Background(), r.o, recovery.TriggerPeriodic, nil)
	if err != nil || !res.Disruption {
		t.Fatalf("want disruption mode: %+v, %v", res, err)
	}
	r.wantGrade("x", nodes.GradeNormal)
	r.wantGrade("n1", nodes.GradeNormal)
	if ev := kinds(t, r.b, audit.KindNodeGrade); len(ev) != 0 {
		t.Fatalf("grade events in disruption mode: %+v", ev)
	}
	// The nodes come back: the guard lifts and the pending interruptions
	// (n1's, and x's claim expired now) are graded.
	r.b.db.MustExec(`UPDATE enginehealth.nodes SET last_active = now()`)
	ch := r.pass()
	if len(ch) != 2 {
		t.Fatalf("after the disruption: %+v", ch)
	}
	r.wantGrade("x", nodes.GradeWarning)
	r.wantGrade("n1", nodes.GradeWarning)
}

// TestGradeResetAndRestart: an operator's reset (an event naming them);
// a clean restart keeps the grade; a NORMAL or unknown node is refused.
func TestGradeResetAndRestart(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n2", "n3")
	ctx := context.Background()
	inc := uuid.NewString()
	if _, err := r.b.nodes.Register(ctx, nodes.Registration{Name: "n1", Incarnation: inc, Hostname: "h"}); err != nil {
		t.Fatal(err)
	}
	r.interrupt("n1", 100)
	r.interrupt("n1", 101)
	r.pass()
	r.wantGrade("n1", nodes.GradeError)

	// A clean shutdown deletes the record, not the grade.
	if err := r.b.nodes.Deregister(ctx, "n1", inc, "clean shutdown"); err != nil {
		t.Fatal(err)
	}
	r.pass()
	if _, err := r.b.nodes.Register(ctx, nodes.Registration{Name: "n1", Incarnation: uuid.NewString(), Hostname: "h"}); err != nil {
		t.Fatal(err)
	}
	r.wantGrade("n1", nodes.GradeError)
	g, err := claims.Grade(ctx, r.b.db, "enginehealth", "n1")
	if err != nil || g != claims.GradeError {
		t.Fatalf("claims.Grade: %q, %v", g, err)
	}
	all, err := claims.Grades(ctx, r.b.db, "enginehealth")
	if err != nil || all["n1"] != claims.GradeError || all["n2"] != claims.GradeNormal || len(all) != 4 {
		t.Fatalf("claims.Grades: %v, %v", all, err)
	}

	c, err := r.b.nodes.ResetGrade(ctx, "n1", audit.By{Actor: "ops (operator)", Via: "n2"}, "host replaced")
	if err != nil || c.From != nodes.GradeError || c.To != nodes.GradeNormal {
		t.Fatalf("reset: %+v, %v", c, err)
	}
	r.wantGrade("n1", nodes.GradeNormal)
	ev := kinds(t, r.b, audit.KindNodeGrade)
	if last := ev[len(ev)-1]; last.Actor != "ops (operator)" || last.Via == nil || *last.Via != "n2" || last.Reason != "host replaced" || *last.ToState != nodes.GradeNormal {
		t.Fatalf("reset event %+v", last)
	}
	if _, err := r.b.nodes.ResetGrade(ctx, "n1", audit.By{Actor: "ops"}, "again"); !errors.Is(err, nodes.ErrGradeNormal) {
		t.Fatalf("second reset: %v", err)
	}
	if _, err := r.b.nodes.ResetGrade(ctx, "nobody", audit.By{Actor: "ops"}, "x"); !errors.Is(err, nodes.ErrNotFound) {
		t.Fatalf("reset of an unknown node: %v", err)
	}
	if _, err := claims.Grade(ctx, r.b.db, "enginehealth", "nobody"); !errors.Is(err, claims.ErrUnknownNode) {
		t.Fatalf("claims.Grade of an unknown node: %v", err)
	}
}

// TestGradeCapCountsStoppedNodes: a node that shut down cleanly while
// ERROR still counts (its grade comes back with it), so the cap holds
// across restarts.
func TestGradeCapCountsStoppedNodes(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n1", "n3") // with m and n2: 4 nodes, one may be ERROR
	ctx := context.Background()
	inc := uuid.NewString()
	if _, err := r.b.nodes.Register(ctx, nodes.Registration{Name: "n2", Incarnation: inc, Hostname: "h"}); err != nil {
		t.Fatal(err)
	}
	r.interrupt("n2", 200)
	r.interrupt("n2", 201)
	r.pass()
	r.wantGrade("n2", nodes.GradeError)
	if err := r.b.nodes.Deregister(ctx, "n2", inc, "clean shutdown"); err != nil {
		t.Fatal(err)
	}
	// Dispatchers still see it (the default schema when none is named).
	if all, err := claims.Grades(ctx, r.b.db, ""); err != nil || all["n2"] != claims.GradeError || len(all) != 4 {
		t.Fatalf("claims.Grades with n2 stopped: %v, %v", all, err)
	}
	r.interrupt("n1", 100)
	r.interrupt("n1", 101)
	ch := r.pass()
	if len(ch) != 2 || ch[1].To != nodes.GradeWarning || !strings.Contains(ch[1].Reason, "1 of 4 nodes are ERROR already") {
		t.Fatalf("second ERROR while the first is stopped: %+v", ch)
	}
}

// TestGradeCapThenPoisonKeepsOwnWarning: the ERROR cap and the "instance
// is the problem" rule meet (outside run). n1 is WARNING for work of its
// own (100); a second interruption of other work (101) within the window
// earns ERROR, but the cap keeps n1 WARNING, named by 101; then 101 is
// interrupted on n2 too: it is the instance's problem, and n1 goes back
// to what its own interruptions still inside the window justify — WARNING
// for 100 — not to NORMAL, and not named by the poison.
func TestGradeCapThenPoisonKeepsOwnWarning(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n1", "n2", "n3") // with m: 4 nodes, one may be ERROR
	// n3 takes the one ERROR the cap allows.
	r.interrupt("n3", 300)
	r.interrupt("n3", 301)
	r.pass()
	r.wantGrade("n3", nodes.GradeError)
	want := func(step string, ch []nodes.GradeChange, from, to, sig string, says ...string) {
		t.Helper()
		if len(ch) != 1 || ch[0].Name != "n1" || ch[0].From != from || ch[0].To != to || ch[0].Signature == nil || ch[0].Signature.String() != sig {
			t.Fatalf("%s: changes %+v, want one of n1 %s → %s for %s", step, ch, from, to, sig)
		}
		for _, s := range says {
			if !strings.Contains(ch[0].Reason, s) {
				t.Fatalf("%s: reason %q does not say %q", step, ch[0].Reason, s)
			}
		}
		if n := r.grade("n1"); n.FailoverGrade != to || n.GradeSignature != sig || n.GradeReason != ch[0].Reason {
			t.Fatalf("%s: node record %s %q %q, want %s %q %q", step, n.FailoverGrade, n.GradeSignature, n.GradeReason, to, sig, ch[0].Reason)
		}
	}

	r.interrupt("n1", 100)
	want("n1's own interruption", r.pass(), nodes.GradeNormal, nodes.GradeWarning, "invoice/send/100")
	r.interrupt("n1", 101)
	want("a second one within the window, capped", r.pass(), nodes.GradeWarning, nodes.GradeWarning, "invoice/send/101",
		"kept at WARNING", "1 of 4 nodes are ERROR already")
	r.interrupt("n2", 101)
	want("101 interrupted on n2 too", r.pass(), nodes.GradeWarning, nodes.GradeWarning, "invoice/send/100",
		"the instance is the problem", "one interruption of its own is left: invoice/send/100")
	r.wantGrade("n2", nodes.GradeNormal)
	r.wantGrade("n3", nodes.GradeError)
	if ch := r.pass(); len(ch) != 0 {
		t.Fatalf("a pass with nothing new: %+v", ch)
	}
	ev := kinds(t, r.b, audit.KindNodeGrade)
	if last := ev[len(ev)-1]; *last.Node != "n1" || *last.FromState != nodes.GradeWarning || *last.ToState != nodes.GradeWarning ||
		*last.Instance != "100" {
		t.Fatalf("last grade event %+v, want n1 WARNING → WARNING for 100", last)
	}
	// The WARNING kept is n1's as any other: one more of its own work
	// within the window earns ERROR again (the cap still holds it).
	r.interrupt("n1", 102)
	want("a third one within the window", r.pass(), nodes.GradeWarning, nodes.GradeWarning, "invoice/send/102",
		"kept at WARNING", "(the first: invoice/send/100)")
}

// TestGradeCapThenPoisonOwnOutsideWindow: the same meeting, but n1's own
// interruption (100) has left the window when 101 turns out to be the
// instance's problem: nothing of its own justifies a grade, NORMAL.
func TestGradeCapThenPoisonOwnOutsideWindow(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n1", "n2", "n3")
	r.interrupt("n3", 300)
	r.interrupt("n3", 301)
	r.pass()
	r.interrupt("n1", 100)
	r.pass()
	r.age("n1", 50*time.Minute)
	r.interrupt("n1", 101) // 50 minutes after 100: within the window
	if ch := r.pass(); len(ch) != 1 || ch[0].To != nodes.GradeWarning || !strings.Contains(ch[0].Reason, "kept at WARNING") {
		t.Fatalf("second interruption, capped: %+v", ch)
	}
	r.age("n1", 20*time.Minute) // 100 is 70 minutes old now
	r.interrupt("n2", 101)
	ch := r.pass()
	if len(ch) != 1 || ch[0].Name != "n1" || ch[0].To != nodes.GradeNormal || ch[0].Signature.String() != "invoice/send/101" ||
		!strings.Contains(ch[0].Reason, "the instance is the problem") {
		t.Fatalf("101 interrupted on n2 with 100 out of the window: %+v", ch)
	}
	r.wantGrade("n1", nodes.GradeNormal)
}

// TestGradeRestoredWarningOfEndedWork: an ERROR taken back to the WARNING
// of the node's own interruption (101) whose instance has meanwhile
// reached an end state — nobody knows where — stays WARNING: the watch
// cannot tell who finished it, so the grade does not rise again as
// "finished elsewhere".
func TestGradeRestoredWarningOfEndedWork(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n1", "n2", "n3")
	r.interrupt("n1", 100)
	r.interrupt("n1", 101)
	r.pass()
	r.wantGrade("n1", nodes.GradeError)
	r.b.db.MustExec(`UPDATE app.invoice SET status = 'Sent' WHERE id = 101`)
	r.interrupt("n2", 100)
	ch := r.pass()
	if len(ch) != 1 || ch[0].Name != "n1" || ch[0].From != nodes.GradeError || ch[0].To != nodes.GradeWarning ||
		ch[0].Signature.String() != "invoice/send/101" {
		t.Fatalf("100 interrupted on n2, 101 ended: %+v, want only n1 ERROR → WARNING for 101", ch)
	}
	if ch := r.pass(); len(ch) != 0 {
		t.Fatalf("next pass: %+v", ch)
	}
	r.wantGrade("n1", nodes.GradeWarning)
}

// TestGradeResetForgivesOwnInterruptions: interruptions from before an
// operator's reset-grade no longer count: when the one interruption after
// it turns out to be the instance's problem, the node is NORMAL, whatever
// it had before the reset within the window.
func TestGradeResetForgivesOwnInterruptions(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n1", "n2", "n3")
	r.interrupt("n1", 100)
	r.interrupt("n1", 101)
	r.pass()
	r.wantGrade("n1", nodes.GradeError)
	if _, err := r.b.nodes.ResetGrade(context.Background(), "n1", audit.By{Actor: "op"}, "host replaced"); err != nil {
		t.Fatal(err)
	}
	r.interrupt("n1", 102)
	if ch := r.pass(); len(ch) != 1 || ch[0].To != nodes.GradeWarning {
		t.Fatalf("first interruption after the reset: %+v", ch)
	}
	r.interrupt("n2", 102)
	ch := r.pass()
	if len(ch) != 1 || ch[0].Name != "n1" || ch[0].To != nodes.GradeNormal {
		t.Fatalf("102 interrupted on n2: %+v, want n1 NORMAL (100 and 101 were forgiven by the reset)", ch)
	}
}

// TestGradePoisonNamedOwnGradesStay: when the work a grade names turns
// out to be the instance's problem but the node's own interruptions still
// earn that grade, the grade stays and names the newest of them; when the
// poison is the other half of a WARNING held by the cap, the WARNING
// stays for the node's own work, no longer held by the cap.
func TestGradePoisonNamedOwnGradesStay(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n1", "n2", "n3")
	// n1: ERROR for 100 and 101 (named by 101), then 102 of its own.
	r.interrupt("n1", 100)
	r.interrupt("n1", 101)
	r.pass()
	r.interrupt("n1", 102)
	r.pass()
	r.wantGrade("n1", nodes.GradeError)
	r.interrupt("n2", 101)
	if ch := r.pass(); len(ch) != 0 {
		t.Fatalf("101 interrupted on n2: %+v, want no grade change (n1 still has 100 and 102)", ch)
	}
	if n := r.grade("n1"); n.FailoverGrade != nodes.GradeError || n.GradeSignature != "invoice/send/102" ||
		!strings.Contains(n.GradeReason, "2 interruptions of its own within failover.window are left, the last: invoice/send/102") {
		t.Fatalf("n1 after 101 turned out poison: %s %q %q", n.FailoverGrade, n.GradeSignature, n.GradeReason)
	}

	// n3: WARNING for 300, held there by the cap (n1 is ERROR) for 301;
	// then 300 is the instance's problem: WARNING for 301 alone.
	r.interrupt("n3", 300)
	r.pass()
	r.interrupt("n3", 301)
	if ch := r.pass(); len(ch) != 1 || ch[0].Name != "n3" || ch[0].To != nodes.GradeWarning || !strings.Contains(ch[0].Reason, "kept at WARNING") {
		t.Fatalf("n3's second interruption: %+v", ch)
	}
	r.interrupt("n2", 300)
	if ch := r.pass(); len(ch) != 0 {
		t.Fatalf("300 interrupted on n2: %+v, want no grade change", ch)
	}
	if n := r.grade("n3"); n.FailoverGrade != nodes.GradeWarning || n.GradeSignature != "invoice/send/301" ||
		strings.Contains(n.GradeReason, "kept at WARNING") || !strings.Contains(n.GradeReason, "one interruption of its own is left: invoice/send/301") {
		t.Fatalf("n3 after 300 turned out poison: %s %q %q", n.FailoverGrade, n.GradeSignature, n.GradeReason)
	}
	// No longer held by the cap: its next capped case says so again.
	r.interrupt("n3", 302)
	if ch := r.pass(); len(ch) != 1 || ch[0].Name != "n3" || ch[0].To != nodes.GradeWarning || !strings.Contains(ch[0].Reason, "kept at WARNING") {
		t.Fatalf("n3's next interruption: %+v", ch)
	}
}

// TestGradeManyAtOnce: 1,200 interruptions of 6 nodes, in three passes of
// 400 (each within one grading batch), on 90 instances (so that some are
// interrupted on several nodes: poison), spread over the last 3 hours
// (so that the window of 30 min and the cap of max_error_fraction 0.5
// decide): the grade events, in order, and the grade rows they leave
// match testdata/grade_many.golden. The golden was written by the grader
// that judged one interruption at a time with its own statements; the
// grader that reads a batch's rows at once must decide exactly as it did.
func TestGradeManyAtOnce(t *testing.T) {
	t.Parallel()
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	r := newGradeRig(t, nodes.GradeConfig{Window: 30 * time.Minute, QuietPeriod: time.Hour, MaxErrorFraction: 0.5}, names...)
	var base time.Time
	if err := r.b.db.Get(&base, `SELECT date_trunc('second', now())`); err != nil {
		t.Fatal(err)
	}
	// A deterministic sequence (an LCG): the same scenario every run.
	x := uint32(7)
	next := func(n int) int {
		x = x*1664525 + 1013904223
		return int(x>>16) % n
	}
	// Times are whole steps of 2 minutes before base (which the passes
	// follow by seconds), so that none is near a boundary of the window,
	// the quiet period or the retention at any pass: the golden does not
	// depend on how long a pass takes.
	const step = 2 * time.Minute
	// Pass 1's work ends two hours back; pass 2's has a lull longer than
	// the window in its middle; pass 3's ends now.
	from, span := []int{90, 58, 20}, []int{30, 16, 20}
	for pass := range 3 {
		for i := range 400 {
			k := from[pass] - i*span[pass]/400
			if pass == 1 && i >= 200 {
				k -= 16
			}
			node := names[next(len(names))]
			// Most work is a node's own (its instances), some is shared.
			inst := strconv.Itoa(next(15) + 15*slices.Index(names, node))
			if next(8) == 0 {
				inst = "shared-" + strconv.Itoa(next(10))
			}
			r.b.db.MustExec(`INSERT INTO enginehealth.interruptions (at, run_id, node, workflow, task, instance)
				VALUES ($1, 0, $2, 'invoice', 'send', $3)`, base.Add(-time.Duration(k)*step), node, inst)
		}
		start := time.Now()
		r.pass()
		t.Logf("pass %d graded 400 interruptions in %s", pass+1, time.Since(start).Round(time.Millisecond))
	}
	var b strings.Builder
	for _, e := range kinds(t, r.b, audit.KindNodeGrade) {
		fmt.Fprintf(&b, "%s %s→%s %s/%s/%s: %s\n", *e.Node, *e.FromState, *e.ToState, deref(e.Workflow), deref(e.Task), deref(e.Instance), e.Reason)
	}
	var rows []struct {
		Node, Grade, Rule string
		Sig               sql.NullString
		Watching          bool
		Ago               sql.NullInt64
	}
	if err := r.b.db.Select(&rows, `SELECT node, grade, rule, workflow || '/' || task || '/' || instance AS sig, watching,
		extract(epoch FROM $1 - last_interruption_at)::bigint AS ago FROM enginehealth.node_grades ORDER BY node`, base); err != nil {
		t.Fatal(err)
	}
	for _, g := range rows {
		fmt.Fprintf(&b, "row %s %s rule=%s sig=%s watching=%t last=%ds ago\n", g.Node, g.Grade, g.Rule, g.Sig.String, g.Watching, g.Ago.Int64)
	}
	testkit.Golden(t, "testdata/grade_many.golden", b.String(), *update)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestGradeOneNodeManyInterruptions: a dead engine's 1,000 expired
// claims (one node, 1,000 instances) are graded in one batch that reads
// and writes the node's grade row a few times, not once per interruption
// (an outside review saw 3,000 expiries make check passes of 15–47 s on
// a loaded host when each interruption ran its own statements): WARNING
// on the first, ERROR on the second, the rest renew its quiet period.
func TestGradeOneNodeManyInterruptions(t *testing.T) {
	t.Parallel()
	r := newGradeRig(t, defaultGrades, "n1", "n2", "n3")
	r.b.db.MustExec(`CREATE TABLE public.grade_writes (n int NOT NULL);
		INSERT INTO public.grade_writes VALUES (0);
		CREATE FUNCTION public.count_grade_write() RETURNS trigger LANGUAGE plpgsql AS
			$$BEGIN UPDATE public.grade_writes SET n = n + 1; RETURN NULL; END$$;
		CREATE TRIGGER count_writes AFTER INSERT OR UPDATE ON enginehealth.node_grades
			FOR EACH ROW EXECUTE FUNCTION public.count_grade_write();`)
	r.b.db.MustExec(`INSERT INTO enginehealth.interruptions (at, run_id, node, workflow, task, instance)
		SELECT now() - make_interval(secs => 1000 - i), 0, 'n1', 'invoice', 'send', i::text FROM generate_series(1, 1000) i`)
	ch := r.pass()
	if len(ch) != 2 || ch[0].To != nodes.GradeWarning || ch[1].To != nodes.GradeError {
		t.Fatalf("grade changes %+v, want WARNING then ERROR", ch)
	}
	var writes, left int
	if err := r.b.db.Get(&writes, `SELECT n FROM public.grade_writes`); err != nil {
		t.Fatal(err)
	}
	// The row made, WARNING, ERROR, the latest interruption noted.
	if writes > 4 {
		t.Fatalf("grading 1,000 interruptions of one node wrote its grade row %d times, want at most 4", writes)
	}
	if err := r.b.db.Get(&left, `SELECT count(*) FROM enginehealth.interruptions WHERE NOT graded`); err != nil || left != 0 {
		t.Fatalf("%d interruptions left ungraded (%v)", left, err)
	}
	var last time.Time
	var newest time.Time
	if err := r.b.db.QueryRow(`SELECT g.last_interruption_at, (SELECT max(at) FROM enginehealth.interruptions)
		FROM enginehealth.node_grades g WHERE node = 'n1'`).Scan(&last, &newest); err != nil || !last.Equal(newest) {
		t.Fatalf("last interruption %v, want the newest %v (%v)", last, newest, err)
	}

	// Then n2's 1,000, with n1 ERROR: the cap (0.34 of 3 nodes) holds n2
	// at WARNING, and its row follows its latest case; written a few
	// times, not twice per interruption (a second review saw 10,000
	// capped interruptions make passes of 12-14 s).
	r.b.db.MustExec(`UPDATE public.grade_writes SET n = 0`)
	r.b.db.MustExec(`INSERT INTO enginehealth.interruptions (at, run_id, node, workflow, task, instance)
		SELECT now() - make_interval(secs => 1000 - i), 0, 'n2', 'invoice', 'send', (10000 + i)::text FROM generate_series(1, 1000) i`)
	ch = r.pass()
	if len(ch) != 2 || ch[0].To != nodes.GradeWarning || ch[1].To != nodes.GradeWarning || !strings.Contains(ch[1].Reason, "kept at WARNING") {
		t.Fatalf("n2's grade changes %+v, want WARNING, then WARNING kept by the cap", ch)
	}
	if err := r.b.db.Get(&writes, `SELECT n FROM public.grade_writes`); err != nil {
		t.Fatal(err)
	}
	// The row made, WARNING, WARNING (capped), its latest case, the
	// latest interruption noted, the watch ended (no such instance).
	if writes > 6 {
		t.Fatalf("grading 1,000 capped interruptions of one node wrote its grade row %d times, want at most 6", writes)
	}
	var sig string
	if err := r.b.db.Get(&sig, `SELECT instance FROM enginehealth.node_grades WHERE node = 'n2'`); err != nil || sig != "11000" {
		t.Fatalf("n2's grade names %q (%v), want its latest case 11000", sig, err)
	}
}

// BenchmarkGradeExpiry: a dead engine's claims expire by the thousand:
// three passes each grade a batch of 1,000 interruptions of one node (a
// pass grades at most gradeBatch), against a pass with nothing to grade,
// in the same run. grade-ms-per-1000-interruptions is a pass's time less
// the idle pass's. Then a poison wave: 1,000 instances that n1 was
// interrupted on (5,000 of its interruptions in the window) are
// interrupted on n2 as well, so each interruption of the batch takes
// back what the instance made of both nodes' grades:
// grade-ms-poison-wave-1000 (less the idle pass).
func BenchmarkGradeExpiry(b *testing.B) {
	r := newGradeRig(b, defaultGrades, "n1", "n2", "n3")
	var busy, idle, poison time.Duration
	for i := range b.N {
		for range 3 {
			r.b.db.MustExec(`UPDATE enginehealth.node_grades SET grade = 'NORMAL', rule = '', workflow = NULL, task = NULL, instance = NULL`)
			r.b.db.MustExec(`INSERT INTO enginehealth.interruptions (at, run_id, node, workflow, task, instance)
				SELECT now() - make_interval(secs => 1000 - i), 0, 'n1', 'invoice', 'send', $1 || '-' || i
				FROM generate_series(1, 1000) i`, strconv.Itoa(i))
			start := time.Now()
			if ch := r.pass(); len(ch) != 2 {
				b.Fatalf("grade changes %+v, want WARNING then ERROR", ch)
			}
			busy += time.Since(start)
			start = time.Now()
			r.pass()
			idle += time.Since(start)
		}
		r.b.db.MustExec(`DELETE FROM enginehealth.interruptions`)
		r.b.db.MustExec(`UPDATE enginehealth.node_grades SET grade = 'NORMAL', rule = '', workflow = NULL, task = NULL, instance = NULL`)
		for k := range 5 {
			r.b.db.MustExec(`INSERT INTO enginehealth.interruptions (at, run_id, node, workflow, task, instance)
				SELECT now() - make_interval(secs => 3000 - i), 0, 'n1', 'invoice', 'send', 'p' || i
				FROM generate_series($1::int * 1000 + 1, $1::int * 1000 + 1000) i`, k)
			r.pass()
		}
		r.wantGrade("n1", nodes.GradeError)
		r.b.db.MustExec(`INSERT INTO enginehealth.interruptions (at, run_id, node, workflow, task, instance)
			SELECT now() - make_interval(secs => 1000 - i), 0, 'n2', 'invoice', 'send', 'p' || i FROM generate_series(1, 1000) i`)
		start := time.Now()
		r.pass()
		poison += time.Since(start)
		if n := r.grade("n2"); n.FailoverGrade != nodes.GradeNormal {
			b.Fatalf("n2 graded %s for poison instances", n.FailoverGrade)
		}
		r.b.db.MustExec(`DELETE FROM enginehealth.interruptions`)
	}
	passes := float64(3 * b.N)
	b.ReportMetric((busy-idle).Seconds()*1000/passes, "grade-ms-per-1000-interruptions")
	b.ReportMetric(busy.Seconds()/idle.Seconds(), "ratio-vs-idle-pass")
	b.ReportMetric((poison.Seconds()-idle.Seconds()/3)*1000/float64(b.N), "grade-ms-poison-wave-1000")
}
