package recovery

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/leader"
)

// The protocol doctor: what the master sees engines do against the claim
// protocol (docs/claim-protocol.md). After each check pass it records, in
// the protocol_violations table, in a fenced transaction:
//
//   - ViolationClaimWithoutNode: a claim held by a node name no record has;
//   - ViolationClaimNotInterim: a claim on an instance gone, or in no
//     task's interim state;
//   - ViolationClaimByNotResponding: a claim a Not responding node took,
//     or renewed, after it was marked;
//   - ViolationInterimWithoutClaim: an instance the run repaired out of an
//     interim state with no claim on it and none seen expiring;
//   - ViolationLateWrite: instances the run decided that someone changed
//     before the repair was written (an engine moving, or claiming, an
//     instance it held no claim on).
//
// A claim's finding is recorded once (by its token) while it lasts; a
// run's, once per run. Findings older than a week are deleted.

// The kinds of violation.
const (
	ViolationClaimWithoutNode     = "claim_without_node"
	ViolationClaimNotInterim      = "claim_not_interim"
	ViolationInterimWithoutClaim  = "interim_without_claim"
	ViolationClaimByNotResponding = "claim_by_not_responding"
	ViolationLateWrite            = "late_write"
)

// ViolationKinds lists the kinds, in the order the console shows them.
var ViolationKinds = []string{ViolationClaimWithoutNode, ViolationClaimNotInterim, ViolationInterimWithoutClaim,
	ViolationClaimByNotResponding, ViolationLateWrite}

// ViolationCount counts findings of a kind in a workflow about a node
// ("" when unknown).
type ViolationCount struct {
	Kind     string    `db:"kind"`
	Workflow string    `db:"workflow"`
	Node     string    `db:"node"`
	Count    int64     `db:"count"`
	Last     time.Time `db:"last"`
}

// Violation is one finding.
type Violation struct {
	ID       int64     `db:"id"`
	At       time.Time `db:"at"`
	Kind     string    `db:"kind"`
	Workflow string    `db:"workflow"`
	Node     string    `db:"node"`
	Instance *string   `db:"instance"`
	RunID    *int64    `db:"run_id"`
	Count    int64     `db:"count"`
	Detail   string    `db:"detail"`
}

// The doctor's statements over the engines' claims tables, rendered per
// workflow (sql/doctor_claims.sql).
var doctorClaimsSQL = load("doctor_claims")

type doctorSlots struct {
	Claims, Instance, Node, Token, ClaimedAt, ExpiresAt string
	Table, ID, Status, Nodes, Violations                string
}

func doctorSlotsOf(w Workflow, schema string) doctorSlots {
	c := w.Claims
	sc := sqltext.Ident(schema)
	return doctorSlots{Claims: claims.Ident(c.Claims), Instance: claims.Ident(c.InstanceColumn), Node: claims.Ident(c.NodeColumn),
		Token: claims.Ident(c.TokenColumn), ClaimedAt: claims.Ident(c.ClaimedAtColumn), ExpiresAt: claims.Ident(c.ExpiresAtColumn),
		Table: claims.Ident(w.Table), ID: claims.Ident(w.IDColumn), Status: claims.Ident(w.StatusColumn),
		Nodes: sc + ".nodes", Violations: sc + ".protocol_violations"}
}

// Doctor records the protocol violations of run (whose task results are
// tasks) and the claims of the claimable workflows now, and returns the
// findings recorded now, counted by kind, workflow and node.
func (r *Repairer) Doctor(ctx context.Context, o *leader.Office, run int64, tasks []TaskResult) ([]ViolationCount, error) {
	var found []ViolationCount
	var wfs, interims []string
	err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		found = found[:0]
		add := func(rows []ViolationCount) {
			found = append(found, rows...)
		}
		for _, w := range r.cfg.Workflows {
			if !w.Claimable() {
				continue
			}
			var is []string
			var timeouts []float64
			for _, t := range w.Tasks {
				is = append(is, t.Interim)
				timeouts = append(timeouts, t.Timeout.Seconds())
				wfs, interims = append(wfs, w.Name), append(interims, t.Interim)
			}
			p, err := doctorClaimsSQL.Prepare(doctorSlotsOf(w, r.cfg.Schema))
			if err != nil {
				return err
			}
			var rows []ViolationCount
			if err := p.Select(ctx, tx, &rows, sqltext.Args{"interims": pq.Array(is), "timeouts_s": pq.Array(timeouts), "workflow": w.Name, "run": run}); err != nil {
				return fmt.Errorf("the claims of %s: %w", w.Name, err)
			}
			add(rows)
		}
		var rows []ViolationCount
		if err := r.st.doctorRun.Select(ctx, tx, &rows, sqltext.Args{"run": run, "workflows": pq.Array(wfs), "interims": pq.Array(interims)}); err != nil {
			return fmt.Errorf("the run's events: %w", err)
		}
		add(rows)
		for _, t := range tasks {
			if t.Lost == 0 {
				continue
			}
			detail := fmt.Sprintf("%d instances of task %s were changed by someone else between run %d's read and its write, and left alone", t.Lost, t.Task, run)
			if t.Lost == 1 {
				detail = fmt.Sprintf("1 instance of task %s was changed by someone else between run %d's read and its write, and left alone", t.Task, run)
			}
			var rows []ViolationCount
			if err := r.st.doctorLate.Select(ctx, tx, &rows, sqltext.Args{"workflow": t.Workflow, "run": run, "count": t.Lost, "detail": detail}); err != nil {
				return fmt.Errorf("a late write: %w", err)
			}
			add(rows)
		}
		_, err := r.st.doctorPrune.Exec(ctx, tx, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("protocol doctor: %w", err)
	}
	return sumViolations(found), nil
}

// sumViolations adds up the counts of the same kind, workflow and node.
func sumViolations(rows []ViolationCount) []ViolationCount {
	var out []ViolationCount
	at := map[[3]string]int{}
	for _, v := range rows {
		k := [3]string{v.Kind, v.Workflow, v.Node}
		if i, ok := at[k]; ok {
			out[i].Count += v.Count
			continue
		}
		at[k] = len(out)
		out = append(out, ViolationCount{Kind: v.Kind, Workflow: v.Workflow, Node: v.Node, Count: v.Count})
	}
	return out
}

// Violations returns the protocol violations found since a time: counted
// by kind, workflow and node, and the latest perKind of each kind.
func (r *Repairer) Violations(ctx context.Context, since time.Time, perKind int) ([]ViolationCount, []Violation, error) {
	counts, examples := []ViolationCount{}, []Violation{}
	if err := r.st.doctorSummary.Select(ctx, r.cfg.DB, &counts, sqltext.Args{"since": since.UTC()}); err != nil {
		return nil, nil, fmt.Errorf("count the protocol violations: %w", err)
	}
	if err := r.st.doctorExamples.Select(ctx, r.cfg.DB, &examples, sqltext.Args{"since": since.UTC(), "per_kind": perKind}); err != nil {
		return nil, nil, fmt.Errorf("read the protocol violations: %w", err)
	}
	return counts, examples, nil
}

// repairKinds are the kinds of the events a repair writes, as SQL
// literals (doctor_run's slot).
func repairKinds() string {
	var ls []string
	for _, k := range []audit.Kind{audit.KindRepair, audit.KindRetried, audit.KindRetryScheduled, audit.KindHeld, audit.KindFailed} {
		ls = append(ls, pq.QuoteLiteral(string(k)))
	}
	return strings.Join(ls, ", ")
}
