package nodes

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/leader"
)

// Failover grades of a node: how much its engine's work can be trusted to
// finish. Dispatchers prefer NORMAL nodes and avoid ERROR ones
// (claims.Grade).
//
//	NORMAL  --a claim of the node expired and its instance was repaired--> WARNING
//	WARNING --another such interruption, other signature, within Window--> ERROR
//	WARNING --the WARNING's instance reached an end state on another node--> ERROR
//	WARNING, ERROR --QuietPeriod without interruptions, or reset-grade--> NORMAL
//
// A signature is workflow + task + instance. When one signature was
// interrupted on two or more nodes, the instance is the problem, not the
// nodes: no grade rises for it, and a grade it had a part in (a WARNING
// for it, an ERROR earned by two interruptions, a WARNING held there by
// the cap) goes down to what the node's own interruptions within the
// window still justify, named by one of them. At most MaxErrorFraction of
// the nodes are ERROR at once; a node that would exceed it stays WARNING.
// The master grades after each check pass that was not in disruption
// mode, so grades never rise while the disruption guard holds. Every change stores its time, signature and
// reason in node_grades and writes a node_grade event.
const (
	GradeNormal  = "NORMAL"
	GradeWarning = "WARNING"
	GradeError   = "ERROR"
)

// Defaults of GradeConfig.
const (
	DefaultGradeWindow      = time.Hour
	DefaultQuietPeriod      = time.Hour
	DefaultMaxErrorFraction = 0.34
)

// gradeBatch bounds the interruptions graded by one call; the rest wait
// for the next pass. A batch reads what it needs once (about 40 ms per
// 1,000 interruptions of one node, 60 ms per 1,000 of poison instances:
// BenchmarkGradeExpiry), so a dead engine's 10,000 expired claims grade
// in one pass, and another node's interruptions after them wait one
// pass, not ten (outside review: 44,000 expiries at 1,000 a pass left a
// dead node NORMAL for 30 passes).
const gradeBatch = 10_000

// GradeConfig configures grading (the failover section of the config).
type GradeConfig struct {
	// Window is the span within which a second interruption with another
	// signature makes a WARNING node ERROR.
	Window time.Duration
	// QuietPeriod without interruptions brings a node back to NORMAL.
	QuietPeriod time.Duration
	// MaxErrorFraction of the nodes may be ERROR at once.
	MaxErrorFraction float64
}

// Validate returns an error naming what is wrong when Window or
// QuietPeriod is not positive, or MaxErrorFraction is outside [0, 1]
// (NaN among them: every comparison with it is false, and no node could
// ever be refused ERROR).
func (c GradeConfig) Validate() error {
	switch {
	case c.Window <= 0 || c.QuietPeriod <= 0:
		return fmt.Errorf("nodes: the grade window and quiet period must be positive, got %s and %s", c.Window, c.QuietPeriod)
	case !(c.MaxErrorFraction >= 0 && c.MaxErrorFraction <= 1):
		return fmt.Errorf("nodes: the grade's max error fraction must be in [0, 1], got %v", c.MaxErrorFraction)
	}
	return nil
}

// retention of graded interruptions: the same-signature rule looks back
// this far.
func (c GradeConfig) retention() time.Duration { return 2 * max(c.Window, c.QuietPeriod) }

// Signature of an interruption.
type Signature struct {
	Workflow string `db:"workflow"`
	Task     string `db:"task"`
	Instance string `db:"instance"`
}

// String returns the signature as workflow/task/instance.
func (s Signature) String() string { return s.Workflow + "/" + s.Task + "/" + s.Instance }

// Whereabouts is what the master sees now of a WARNING's instance.
type Whereabouts struct {
	// Claimant is the node claiming the instance now; "" if none.
	Claimant string
	// State of the instance now ("" when it is gone).
	State string
	// Ended reports whether State is an end state of the signature's task.
	Ended bool
	// Left reports whether the instance left the task otherwise (failed,
	// moved on, gone).
	Left bool
}

// Locate returns the whereabouts of a signature's instance, read in the
// grading transaction.
type Locate func(ctx context.Context, tx *leader.Tx, s Signature) (Whereabouts, error)

// GradeChange is one change of a node's grade.
type GradeChange struct {
	Name      string
	From      string
	To        string
	Signature *Signature
	Reason    string
}

// gradeRow is a node_grades row.
type gradeRow struct {
	Node      string         `db:"node"`
	Grade     string         `db:"grade"`
	ChangedAt time.Time      `db:"changed_at"`
	Workflow  sql.NullString `db:"workflow"`
	Task      sql.NullString `db:"task"`
	Instance  sql.NullString `db:"instance"`
	LastAt    sql.NullTime   `db:"last_interruption_at"`
	Watching  bool           `db:"watching"`
	Seen      sql.NullString `db:"seen_claimant"`
	Rule      string         `db:"rule"`
}

// Rules of grade changes (node_grades.rule).
const (
	ruleInterrupted = "interrupted"        // NORMAL → WARNING
	ruleWindow      = "window"             // → ERROR: a second interruption within the window
	ruleElsewhere   = "finished_elsewhere" // → ERROR: the WARNING's work finished on another node
	ruleInstance    = "instance"           // back down: the instance is the problem
	ruleQuiet       = "quiet"              // → NORMAL after the quiet period
	ruleReset       = "reset"              // → NORMAL by an operator
	ruleCapped      = "capped"             // kept at WARNING by max_error_fraction
)

func (g gradeRow) signature() (Signature, bool) {
	return Signature{Workflow: g.Workflow.String, Task: g.Task.String, Instance: g.Instance.String}, g.Instance.Valid
}

// interruption is an interruptions row.
type interruption struct {
	ID   int64     `db:"id"`
	At   time.Time `db:"at"`
	Node string    `db:"node"`
	Signature
}

// grader is one grading call, inside the master's fenced transaction.
type grader struct {
	s       *Store
	ctx     context.Context
	tx      *leader.Tx
	cfg     GradeConfig
	m       MasterEvent
	locate  Locate
	changes []GradeChange
	// While the interruptions of a batch are graded: the grade rows
	// loaded (locked), kept as the grader writes them, so that a node is
	// read once per batch, not once per interruption; each node's latest
	// interruption of the batch, written once at the batch's end; and
	// each node's own interruptions that may count (own), read once.
	rows  map[string]*gradeRow
	notes map[string]time.Time
	owns  map[string]*owned
	// Also while a batch is graded: the rewrites of a grade row that
	// change no grade (a node held at WARNING by the cap following its
	// latest case, a grade renamed after a poison instance), written once
	// per node at the batch's end, the last one standing; and the
	// nodes' error counts of raise, read again only after a grade row
	// was written.
	rewrites map[string]sqltext.Args
	counts   map[string]errorCount
}

// errorCount is count_errors's answer.
type errorCount struct {
	Errors int `db:"errors"`
	Total  int `db:"total"`
}

// Grade judges the interruptions recorded since the last call, watches
// the instances of WARNING nodes, brings quiet nodes back to NORMAL and
// drops old interruptions, in the master's fenced transaction. Call it
// only after a pass that was not in disruption mode. It returns the
// changes, each already recorded with an event.
func (s *Store) Grade(ctx context.Context, tx *leader.Tx, cfg GradeConfig, m MasterEvent, locate Locate) ([]GradeChange, error) {
	g := &grader{s: s, ctx: ctx, tx: tx, cfg: cfg, m: m, locate: locate, changes: []GradeChange{}}
	if err := g.interruptions(); err != nil {
		return nil, fmt.Errorf("grade interruptions: %w", err)
	}
	if err := g.watch(); err != nil {
		return nil, fmt.Errorf("grade: watch instances: %w", err)
	}
	if err := g.calm(); err != nil {
		return nil, fmt.Errorf("grade: quiet nodes: %w", err)
	}
	if _, err := s.sql.dropOldInterruptions.Exec(ctx, tx, sqltext.Args{"retention": cfg.retention().Seconds()}); err != nil {
		return nil, fmt.Errorf("grade: drop old interruptions: %w", err)
	}
	if _, err := s.sql.dropGoneGrades.Exec(ctx, tx, nil); err != nil {
		return nil, fmt.Errorf("grade: drop grades of gone nodes: %w", err)
	}
	return g.changes, nil
}

// load returns node's grade row, locked, creating a NORMAL one; read
// from the database once per batch, then as the grader wrote it (called
// only while a batch is graded: interruption and withdraw).
func (g *grader) load(node string) (gradeRow, error) {
	if r, ok := g.rows[node]; ok {
		return *r, nil
	}
	var r gradeRow
	if _, err := g.s.sql.ensureGrade.Exec(g.ctx, g.tx, sqltext.Args{"node": node}); err != nil {
		return r, err
	}
	if err := g.s.sql.lockGrade.Get(g.ctx, g.tx, &r, sqltext.Args{"node": node}); err != nil {
		return r, err
	}
	g.rows[node] = &r
	return r, nil
}

// loaded applies fn to node's grade row as loaded, if it is: what a
// statement the grader ran wrote to it.
func (g *grader) loaded(node string, fn func(r *gradeRow)) {
	if r, ok := g.rows[node]; ok {
		fn(r)
	}
}

// set changes r's grade to to (or keeps it, for a WARNING that moves to
// another signature), with its signature and reason, and an event.
func (g *grader) set(r gradeRow, to, rule string, sig *Signature, reason string, watching bool) error {
	if err := g.update(r, to, rule, sig, reason, watching, true); err != nil {
		return err
	}
	var wf, task, inst *string
	if sig != nil {
		wf, task, inst = &sig.Workflow, &sig.Task, &sig.Instance
	}
	node, from := r.Node, r.Grade
	// An event of the run: its master and term are the run's (stored
	// there; given here for its log line).
	e := audit.Event{Kind: audit.KindNodeGrade, RunActor: g.m.Actor, RunTerm: &g.m.Term, RunID: &g.m.RunID, Node: &node,
		FromState: &from, ToState: &to, Workflow: wf, Task: task, Instance: inst, Reason: reason}
	if err := g.s.events.Write(g.ctx, g.tx, e); err != nil {
		return err
	}
	g.changes = append(g.changes, GradeChange{Name: r.Node, From: from, To: to, Signature: sig, Reason: reason})
	return nil
}

// update writes r's grade row as set does, without an event; changed
// moves its changed_at to now. Within a batch, a rewrite that changes no
// grade (not changed: the grade it writes is the row's) waits for the
// batch's end, where only each node's last one is written; any other
// write of the row supersedes it (it writes every column the rewrite
// would).
func (g *grader) update(r gradeRow, to, rule string, sig *Signature, reason string, watching, changed bool) error {
	var wf, task, inst *string
	if sig != nil {
		wf, task, inst = &sig.Workflow, &sig.Task, &sig.Instance
	}
	args := sqltext.Args{"node": r.Node, "grade": to, "workflow": wf, "task": task, "instance": inst,
		"reason": reason, "watching": watching, "rule": rule, "changed": changed}
	switch {
	case !changed && to == r.Grade && g.rewrites != nil:
		g.rewrites[r.Node] = args
	default:
		delete(g.rewrites, r.Node)
		if _, err := g.s.sql.updateGrade.Exec(g.ctx, g.tx, args); err != nil {
			return err
		}
		clear(g.counts) // a grade may have changed: count again
	}
	// As update_grade wrote it (changed_at aside: grading interruptions
	// does not read it; the watch reads the rows again).
	g.loaded(r.Node, func(l *gradeRow) {
		l.Grade, l.Rule, l.Watching, l.Seen = to, rule, watching, sql.NullString{}
		l.Workflow, l.Task, l.Instance = sql.NullString{}, sql.NullString{}, sql.NullString{}
		if sig != nil {
			l.Workflow, l.Task, l.Instance = valid(sig.Workflow), valid(sig.Task), valid(sig.Instance)
		}
	})
	return nil
}

// rewrite writes node's pending rewrite, if any (before a statement that
// writes only some of its row's columns, and at the batch's end).
func (g *grader) rewrite(node string) error {
	args, ok := g.rewrites[node]
	if !ok {
		return nil
	}
	delete(g.rewrites, node)
	_, err := g.s.sql.updateGrade.Exec(g.ctx, g.tx, args)
	return err
}

func valid(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }

// raise makes r ERROR, unless that would put more than MaxErrorFraction
// of the nodes in ERROR: then r stays WARNING for sig (watching it if
// watching).
func (g *grader) raise(r gradeRow, rule string, sig Signature, reason string, watching bool) error {
	// The nodes: every record, and every node graded WARNING or ERROR
	// without one (it shut down cleanly: its grade stays and comes back
	// with it), this one included. Within a batch, read again only after
	// a grade row was written (a node held at WARNING by the cap would
	// count them once per interruption).
	c, ok := g.counts[r.Node]
	if !ok {
		if err := g.s.sql.countErrors.Get(g.ctx, g.tx, &c, sqltext.Args{"node": r.Node}); err != nil {
			return err
		}
		if g.counts != nil {
			g.counts[r.Node] = c
		}
	}
	if float64(c.Errors+1) > g.cfg.MaxErrorFraction*float64(c.Total)+1e-9 {
		why := fmt.Sprintf("%s; kept at WARNING: %d of %d nodes are ERROR already and failover.max_error_fraction is %g",
			reason, c.Errors, c.Total, g.cfg.MaxErrorFraction)
		if r.Grade == GradeWarning && r.Rule == ruleCapped {
			// Held at WARNING by the cap already: the record follows the
			// latest case, but nothing changed, so no event (a node held
			// there by a poison instance would write one per interruption).
			return g.update(r, GradeWarning, ruleCapped, &sig, why, watching, false)
		}
		return g.set(r, GradeWarning, ruleCapped, &sig, why, watching)
	}
	return g.set(r, GradeError, rule, &sig, reason, false)
}

// interruptions grades the interruptions not graded yet, oldest first,
// one after another as they happened; the rows they read (the nodes each
// instance was interrupted on, the nodes' grades) are read once for the
// batch, and each node's latest interruption written once, after it.
func (g *grader) interruptions() error {
	var ps []interruption
	if err := g.s.sql.ungraded.Select(g.ctx, g.tx, &ps, sqltext.Args{"batch": gradeBatch}); err != nil {
		return err
	}
	if len(ps) == 0 {
		return nil
	}
	on, err := g.interruptedOn(ps)
	if err != nil {
		return err
	}
	g.rows, g.notes, g.owns = map[string]*gradeRow{}, map[string]time.Time{}, map[string]*owned{}
	g.rewrites, g.counts = map[string]sqltext.Args{}, map[string]errorCount{}
	defer func() { g.rows, g.notes, g.owns, g.rewrites, g.counts = nil, nil, nil, nil, nil }()
	ids := make([]int64, 0, len(ps))
	for _, p := range ps {
		ids = append(ids, p.ID)
		if err := g.interruption(p, on[p.Signature]); err != nil {
			return err
		}
	}
	// The grade rows are locked already; sorted, the statements come in
	// the same order each time.
	for _, n := range slices.Sorted(maps.Keys(g.rewrites)) {
		if err := g.rewrite(n); err != nil {
			return err
		}
	}
	for _, n := range slices.Sorted(maps.Keys(g.notes)) {
		if _, err := g.s.sql.noteInterruption.Exec(g.ctx, g.tx, sqltext.Args{"node": n, "at": g.notes[n]}); err != nil {
			return err
		}
	}
	_, err = g.s.sql.markGraded.Exec(g.ctx, g.tx, sqltext.Args{"ids": pq.Array(ids)})
	return err
}

// interruptedOn returns, for each signature of ps, the nodes its work
// was interrupted on within the retention.
func (g *grader) interruptedOn(ps []interruption) (map[Signature][]string, error) {
	var wfs, insts, tasks []string
	seen := map[Signature]bool{}
	for _, p := range ps {
		if !seen[p.Signature] {
			seen[p.Signature] = true
			wfs, insts, tasks = append(wfs, p.Workflow), append(insts, p.Instance), append(tasks, p.Task)
		}
	}
	var rows []struct {
		Signature
		Nodes pq.StringArray `db:"nodes"`
	}
	if err := g.s.sql.interruptedOn.Select(g.ctx, g.tx, &rows, sqltext.Args{"workflows": pq.Array(wfs), "instances": pq.Array(insts),
		"tasks": pq.Array(tasks), "retention": g.cfg.retention().Seconds()}); err != nil {
		return nil, err
	}
	on := make(map[Signature][]string, len(rows))
	for _, r := range rows {
		on[r.Signature] = r.Nodes
	}
	return on, nil
}

func (g *grader) interruption(p interruption, on []string) error {
	if len(on) > 1 {
		// The instance is the problem: no grade rises for it, and what it
		// made of the nodes' grades is taken back.
		for _, n := range on {
			if err := g.withdraw(n, p, on); err != nil {
				return err
			}
		}
		return nil
	}
	r, err := g.load(p.Node)
	if err != nil {
		return err
	}
	last := r.LastAt
	// note_interruption, at the batch's end: the quiet period counts from
	// the node's latest interruption.
	if at, ok := g.notes[r.Node]; !ok || p.At.After(at) {
		g.notes[r.Node] = p.At
	}
	g.loaded(r.Node, func(l *gradeRow) {
		if !l.LastAt.Valid || p.At.After(l.LastAt.Time) {
			l.LastAt = sql.NullTime{Time: p.At, Valid: true}
		}
	})
	what := fmt.Sprintf("the claim of %s on %s expired and the instance was repaired", p.Node, p.Signature)
	sig := p.Signature
	switch r.Grade {
	case GradeNormal:
		return g.set(r, GradeWarning, ruleInterrupted, &sig, what, true)
	case GradeWarning:
		prev, _ := r.signature()
		switch {
		case prev == sig:
			return nil // the same work again: the instance's count rises, not the grade
		case last.Valid && p.At.Sub(last.Time) <= g.cfg.Window:
			return g.raise(r, ruleWindow, sig, fmt.Sprintf("%s, a second interruption within failover.window %s (the first: %s)", what, g.cfg.Window, prev), true)
		default:
			return g.set(r, GradeWarning, ruleInterrupted, &sig, what+" (more than failover.window after the last one)", true)
		}
	}
	return nil // ERROR: only the quiet period is renewed
}

// withdraw takes back what the signature of interruption p, now known
// to be the instance's problem (interrupted on the nodes on), made of
// node's grade. A grade it had a part in — a WARNING for it, an ERROR
// earned by two interruptions, a WARNING held there by the cap (whichever
// signature it names: the cap may have moved it on) — goes down to what
// the node's own interruptions within the window still justify: NORMAL
// for none; WARNING for one, named by it; for two or more the grade they
// earned stays (ERROR, or WARNING held by the cap), named by the newest
// of them if it named sig. Other grades (NORMAL, a WARNING for other work
// that the cap does not hold, an ERROR for work finished elsewhere) owe
// nothing to sig and stay.
func (g *grader) withdraw(node string, p interruption, on []string) error {
	r, err := g.load(node)
	if err != nil {
		return err
	}
	sig := p.Signature
	cur, named := r.signature()
	named = named && cur == sig
	switch {
	case r.Grade == GradeWarning && (named || r.Rule == ruleCapped):
	case r.Grade == GradeError && r.Rule == ruleWindow:
	default:
		return nil
	}
	count, last, err := g.own(node, p.ID)
	if err != nil {
		return err
	}
	why := fmt.Sprintf("%s was interrupted on %d nodes (%s): the instance is the problem, not the node", sig, len(on), strings.Join(on, ", "))
	switch {
	case count == 0:
		return g.set(r, GradeNormal, ruleInstance, &sig, why, false)
	case count == 1 && r.Grade == GradeWarning && cur == last:
		// Held by the cap for last and sig: a plain WARNING for last
		// now, its watch going on as it was.
		if err := g.rewrite(r.Node); err != nil {
			return err
		}
		if _, err := g.s.sql.setRule.Exec(g.ctx, g.tx, sqltext.Args{"node": r.Node, "rule": ruleInterrupted,
			"reason": fmt.Sprintf("%s; one interruption of its own is left: %s", why, last)}); err != nil {
			return err
		}
		g.loaded(r.Node, func(l *gradeRow) { l.Rule = ruleInterrupted })
		return nil
	case count == 1:
		watching, err := g.watchable(last)
		if err != nil {
			return err
		}
		return g.set(r, GradeWarning, ruleInterrupted, &last, fmt.Sprintf("%s; one interruption of its own is left: %s", why, last), watching)
	case named:
		// Still earned by its own interruptions: the grade stays (no
		// event), named by the newest of them instead of the poison.
		watching := false
		if r.Grade == GradeWarning {
			if watching, err = g.watchable(last); err != nil {
				return err
			}
		}
		return g.update(r, r.Grade, r.Rule, &last, fmt.Sprintf("%s; %d interruptions of its own within failover.window are left, the last: %s",
			why, count, last), watching, false)
	}
	return nil
}

// own returns how many signatures of node's own interruptions count now,
// and the newest of them (by its newest interruption): within the window,
// since its grade was last cleared (reset-grade, quiet period), on work
// interrupted on no other node, and graded already or graded up to
// interruption upTo (the rest of the batch is judged after it). What may
// count is read once per node per batch (nothing grading a batch does
// changes it: the interruptions are marked graded after it), and the
// graded part summed up once; each call adds the batch's interruptions
// up to upTo. Read per call, a node with thousands of interruptions in
// the window made each call read them all: an outside review saw a pass
// of poison interruptions take 82 s.
func (g *grader) own(node string, upTo int64) (int, Signature, error) {
	o, ok := g.owns[node]
	if !ok {
		var rows []ownRow
		if err := g.s.sql.ownInterruptions.Select(g.ctx, g.tx, &rows, sqltext.Args{"node": node, "window": g.cfg.Window.Seconds(),
			"retention": g.cfg.retention().Seconds()}); err != nil {
			return 0, Signature{}, err
		}
		o = newOwned(rows)
		g.owns[node] = o
	}
	n, last := o.upTo(upTo)
	return n, last, nil
}

// ownRow is a row of own_interruptions.
type ownRow struct {
	Signature
	Graded bool      `db:"graded"`
	At     time.Time `db:"at"`
	ID     int64     `db:"id"`
}

// newest orders a node's signatures as own_interruptions's reader does:
// by the time of their newest interruption, then its id.
type newest struct {
	at time.Time
	id int64
}

func (a newest) after(b newest) bool { return a.at.After(b.at) || a.at.Equal(b.at) && a.id > b.id }

// add folds an interruption at, id into the signature's newest.
func (a newest) add(at time.Time, id int64) newest {
	if at.After(a.at) {
		a.at = at
	}
	a.id = max(a.id, id)
	return a
}

// owned is what of a node's own interruptions may count, for own.
type owned struct {
	graded  map[Signature]newest
	top     Signature // the newest graded signature
	pending []ownRow  // not graded yet, by id
}

func newOwned(rows []ownRow) *owned {
	o := &owned{graded: map[Signature]newest{}}
	for _, r := range rows {
		if !r.Graded {
			o.pending = append(o.pending, r)
			continue
		}
		n := o.graded[r.Signature].add(r.At, r.ID)
		o.graded[r.Signature] = n
		if top, ok := o.graded[o.top]; !ok || n.after(top) {
			o.top = r.Signature
		}
	}
	slices.SortFunc(o.pending, func(a, b ownRow) int { return cmp.Compare(a.ID, b.ID) })
	return o
}

// upTo is own's answer: the graded signatures, and those of the pending
// interruptions up to id.
func (o *owned) upTo(id int64) (int, Signature) {
	n := len(o.graded)
	top, key, has := o.top, o.graded[o.top], n > 0
	touched := map[Signature]newest{}
	for _, r := range o.pending {
		if r.ID > id {
			break
		}
		k, ok := touched[r.Signature]
		if !ok {
			var graded bool
			if k, graded = o.graded[r.Signature]; !graded {
				n++
			}
		}
		touched[r.Signature] = k.add(r.At, r.ID)
	}
	for sig, k := range touched {
		if !has || k.after(key) {
			top, key, has = sig, k, true
		}
	}
	return n, top
}

// watchable says whether a WARNING given back for an earlier interruption
// (sig) should watch its instance: not when it has already reached an end
// state or left the task — who finished it is not known any more, so the
// grade stays (as the watch does with an unknown finisher).
func (g *grader) watchable(sig Signature) (bool, error) {
	w, err := g.locate(g.ctx, g.tx, sig)
	if err != nil {
		return false, err
	}
	return !w.Ended && !w.Left, nil
}

// watch follows the instance of each WARNING: the last node seen claiming
// it, and whether it reached an end state on another node.
func (g *grader) watch() error {
	var rs []gradeRow
	if err := g.s.sql.watched.Select(g.ctx, g.tx, &rs, nil); err != nil {
		return err
	}
	for _, r := range rs {
		sig, ok := r.signature()
		if !ok {
			continue
		}
		w, err := g.locate(g.ctx, g.tx, sig)
		if err != nil {
			return err
		}
		seen := r.Seen.String
		if w.Claimant != "" {
			seen = w.Claimant
		}
		switch {
		case w.Ended:
			by := seen
			if by == "" {
				// Nobody was seen claiming it (a short task between two
				// passes): it finished elsewhere if this node has not
				// heartbeated since it was graded.
				var away bool
				if err := g.s.sql.away.Get(g.ctx, g.tx, &away, sqltext.Args{"node": r.Node, "since": r.ChangedAt}); err != nil {
					return err
				}
				if away {
					by = "another node (" + r.Node + " has not heartbeated since)"
				}
			}
			if by != "" && by != r.Node {
				if err := g.raise(r, ruleElsewhere, sig, fmt.Sprintf("%s reached %s on %s after the claim of %s on it expired: the work was fine, the node was not",
					sig, w.State, by, r.Node), false); err != nil {
					return err
				}
				continue
			}
			fallthrough
		case w.Left: // the watch ends
			_, err = g.s.sql.endWatch.Exec(g.ctx, g.tx, sqltext.Args{"node": r.Node, "seen": seen})
		case seen != r.Seen.String:
			_, err = g.s.sql.seeClaimant.Exec(g.ctx, g.tx, sqltext.Args{"node": r.Node, "seen": seen})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// calm brings back to NORMAL the nodes without an interruption (or a
// grade change) for the quiet period.
func (g *grader) calm() error {
	var rs []gradeRow
	if err := g.s.sql.quiet.Select(g.ctx, g.tx, &rs, sqltext.Args{"quiet_period": g.cfg.QuietPeriod.Seconds()}); err != nil {
		return err
	}
	for _, r := range rs {
		if err := g.set(r, GradeNormal, ruleQuiet, nil, fmt.Sprintf("no interruption for failover.quiet_period %s", g.cfg.QuietPeriod), false); err != nil {
			return err
		}
		// The interruptions before are forgiven (withdraw counts none).
		if _, err := g.s.sql.forgive.Exec(g.ctx, g.tx, sqltext.Args{"node": r.Node}); err != nil {
			return err
		}
	}
	return nil
}

// ErrGradeNormal refuses reset-grade of a node that is NORMAL already.
var ErrGradeNormal = errors.New("nodes: grade is " + GradeNormal + " already")

// ResetGrade is an operator's reset of node name's grade to NORMAL, with
// an event. A node without a record may be reset while it still has a
// grade (it shut down cleanly while WARNING or ERROR).
func (s *Store) ResetGrade(ctx context.Context, name string, by audit.By, reason string) (GradeChange, error) {
	var c GradeChange
	err := pgdb.InTx(ctx, s.db, func(tx *pgdb.Tx) error {
		var r gradeRow
		err := s.sql.lockGrade.Get(ctx, tx, &r, sqltext.Args{"node": name})
		if errors.Is(err, sql.ErrNoRows) {
			r = gradeRow{Node: name, Grade: GradeNormal}
			var known bool
			if err := s.sql.known.Get(ctx, tx, &known, sqltext.Args{"name": name}); err != nil {
				return err
			}
			if !known {
				return ErrNotFound
			}
		} else if err != nil {
			return err
		}
		if r.Grade == GradeNormal {
			return ErrGradeNormal
		}
		if _, err := s.sql.resetGrade.Exec(ctx, tx, sqltext.Args{"node": name, "reason": reason}); err != nil {
			return err
		}
		from, to := r.Grade, GradeNormal
		c = GradeChange{Name: name, From: from, To: to, Reason: reason}
		return s.events.Write(ctx, tx, audit.Event{Kind: audit.KindNodeGrade, Actor: by.Actor, Via: audit.Str(by.Via), Node: &name,
			FromState: &from, ToState: &to, Reason: reason})
	})
	if err != nil {
		return GradeChange{}, fmt.Errorf("reset the grade of node %s: %w", name, err)
	}
	return c, nil
}
