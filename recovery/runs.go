package recovery

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/leader"
)

// RunKind is what a run is: a recovery (start-up or an operator's), or
// a pass of the periodic check.
type RunKind string

// Run kinds.
const (
	KindRecovery RunKind = "recovery"
	KindCheck    RunKind = "check"
)

// RunKinds are the kinds a run may have.
var RunKinds = []RunKind{KindRecovery, KindCheck}

// Valid reports whether k is one of RunKinds.
func (k RunKind) Valid() bool { return slices.Contains(RunKinds, k) }

// String returns the kind as the runs table and the API write it.
func (k RunKind) String() string { return string(k) }

// Scope of a run: the workflows it covers (all applicable when empty).
type Scope struct {
	Workflows []string `json:"workflows"`
}

// RunSpec describes a run to begin.
type RunSpec struct {
	Kind    RunKind
	Trigger Trigger
	Scope   Scope
	// ResumedFrom is the interrupted run this one finishes, if any.
	ResumedFrom *int64
}

// RunRow is a row of the runs table.
type RunRow struct {
	ID      int64   `db:"id"`
	Term    int64   `db:"term"`
	Master  string  `db:"master"`
	Kind    RunKind `db:"kind"`
	Trigger Trigger `db:"trigger"`
	Scope   string  `db:"scope"`
	// ClaimsExpired counts expired claims deleted by the run.
	ClaimsExpired int64 `db:"claims_expired"`
	// Planned and Done count instances to repair and repaired.
	Planned     int64      `db:"planned"`
	Done        int64      `db:"done"`
	Status      string     `db:"status"`
	StartedAt   time.Time  `db:"started_at"`
	FinishedAt  *time.Time `db:"finished_at"`
	Error       string     `db:"error"` // a failed run's class of failure; empty when none
	ResumedFrom *int64     `db:"resumed_from"`
}

// ScopeOf decodes the row's scope.
func (r RunRow) ScopeOf() (Scope, error) {
	var sc Scope
	err := json.Unmarshal([]byte(r.Scope), &sc)
	return sc, err
}

// InRun is the one way to do master work inside a run: the run row is
// written first (fenced), then work runs with its id, then the row is
// marked finished, or failed with a cause-free summary of work's error
// (the row is shown to API clients; the caller logs the whole error). It
// returns the run's id (0 when the row could not be written) and work's
// error, or the error of ending the run.
func (r *Repairer) InRun(ctx context.Context, o *leader.Office, spec RunSpec, work func(run int64) error) (int64, error) {
	r.endUnended(ctx, o)
	run, err := r.beginRun(ctx, o, spec)
	if err != nil {
		return 0, err
	}
	err = work(run)
	if ferr := r.endRun(ctx, o, run, err); ferr != nil {
		r.mu.Lock()
		r.unended = append(r.unended, unendedRun{id: run, term: o.Term, err: err})
		r.mu.Unlock()
		if err == nil {
			err = ferr
		}
	}
	return run, err
}

// unendedRun is a run whose end could not be written, with its term and
// the error its work ended with.
type unendedRun struct {
	id, term int64
	err      error
}

// endUnended ends the runs whose end could not be written, those of o's
// term (the others are a later master's to close as interrupted). A
// failure leaves them for the next run.
func (r *Repairer) endUnended(ctx context.Context, o *leader.Office) {
	r.mu.Lock()
	pending := r.unended
	r.unended = nil
	r.mu.Unlock()
	var left []unendedRun
	for _, u := range pending {
		if u.term != o.Term {
			continue
		}
		if err := r.endRun(ctx, o, u.id, u.err); err != nil {
			left = append(left, u)
		}
	}
	if len(left) > 0 {
		r.mu.Lock()
		r.unended = append(left, r.unended...)
		r.mu.Unlock()
	}
}

// beginRun writes a run row, fenced, and returns its id.
func (r *Repairer) beginRun(ctx context.Context, o *leader.Office, spec RunSpec) (int64, error) {
	scope, err := json.Marshal(spec.Scope)
	if err != nil {
		return 0, err
	}
	var id int64
	err = r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		return r.st.beginRun.Get(ctx, tx, &id, sqltext.Args{"term": o.Term, "master": o.Candidate.Name, "kind": spec.Kind,
			"trigger": spec.Trigger, "scope": string(scope), "resumed_from": spec.ResumedFrom})
	})
	if err != nil {
		return 0, fmt.Errorf("begin %s run: %w", spec.Trigger, err)
	}
	return id, nil
}

// endRun marks a run finished, or failed with a summary of runErr.
func (r *Repairer) endRun(ctx context.Context, o *leader.Office, run int64, runErr error) error {
	status, msg := "finished", ""
	if runErr != nil {
		status, msg = "failed", pgdb.Summary(runErr)
	}
	err := r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		_, err := r.st.endRun.Exec(ctx, tx, sqltext.Args{"run": run, "status": status, "error": msg})
		return err
	})
	if err != nil {
		return fmt.Errorf("end run %d: %w", run, err)
	}
	return nil
}

func (r *Repairer) addPlanned(ctx context.Context, o *leader.Office, run, n int64) error {
	return r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		_, err := r.st.addPlanned.Exec(ctx, tx, sqltext.Args{"run": run, "n": n})
		return err
	})
}

// Unfinished returns the runs still marked running from terms before o's:
// cut short by a master crash or a lost office.
func (r *Repairer) Unfinished(ctx context.Context, o *leader.Office) ([]RunRow, error) {
	rows := []RunRow{}
	if err := r.st.unfinishedRuns.Select(ctx, r.cfg.DB, &rows, sqltext.Args{"term": o.Term}); err != nil {
		return nil, fmt.Errorf("list unfinished runs: %w", err)
	}
	return rows, nil
}

// Interrupt closes an unfinished run of an older term as interrupted, with
// a note on what became of its work.
func (r *Repairer) Interrupt(ctx context.Context, o *leader.Office, old RunRow, note string) error {
	return r.cfg.Fence.InTx(ctx, o, func(tx *leader.Tx) error {
		_, err := r.st.interruptRun.Exec(ctx, tx, sqltext.Args{"run": old.ID, "note": note})
		return err
	})
}

// ErrNoRun means no run has the id asked for.
var ErrNoRun = errors.New("recovery: no such run")

// RunDetail is one run with what it did per workflow task.
type RunDetail struct {
	RunRow
	// Took is the time from start to finish (to now while it runs).
	Took time.Duration
	// Counts holds its events about workflow tasks, by workflow, task, kind
	// and the state instances went to.
	Counts []audit.Count
}

// Run returns run id with its counts; ErrNoRun when there is none.
func (r *Repairer) Run(ctx context.Context, id int64) (RunDetail, error) {
	var d RunDetail
	var now time.Time
	err := r.st.getRun.Get(ctx, r.cfg.DB, &d.RunRow, sqltext.Args{"run": id})
	if errors.Is(err, sql.ErrNoRows) {
		return d, fmt.Errorf("%w: %d", ErrNoRun, id)
	}
	if err != nil {
		return d, fmt.Errorf("read run %d: %w", id, err)
	}
	if err := r.st.clock.Get(ctx, r.cfg.DB, &now, nil); err != nil {
		return d, fmt.Errorf("read the clock: %w", err)
	}
	end := now
	if d.FinishedAt != nil {
		end = *d.FinishedAt
	}
	d.Took = end.Sub(d.StartedAt)
	d.Counts, err = r.cfg.Events.RunCounts(ctx, r.cfg.DB, id, d.StartedAt, end)
	return d, err
}

// ListRuns returns the latest runs, newest first.
func (r *Repairer) ListRuns(ctx context.Context, limit int) ([]RunRow, error) {
	return r.listRuns(ctx, r.st.listRuns, limit)
}

// ActedRuns lists the latest runs that did something or did not finish
// well, newest first: claims expired, instances planned, an error, a run
// not finished, or a manual one (idle passes are left out).
func (r *Repairer) ActedRuns(ctx context.Context, limit int) ([]RunRow, error) {
	return r.listRuns(ctx, r.st.actedRuns, limit)
}

// listRuns lists the latest runs of list (a shape of list_runs), newest
// first.
func (r *Repairer) listRuns(ctx context.Context, list sqltext.Prepared, limit int) ([]RunRow, error) {
	rows := []RunRow{}
	if err := list.Select(ctx, r.cfg.DB, &rows, sqltext.Args{"limit": limit}); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return rows, nil
}

// runChain returns run and the runs it resumes, one after the other
// (sql/run_chain.sql).
func (r *Repairer) runChain(ctx context.Context, run int64) ([]int64, error) {
	var ids pq.Int64Array
	if err := r.st.runChain.Get(ctx, r.cfg.DB, &ids, sqltext.Args{"run": run}); err != nil {
		return nil, fmt.Errorf("recovery: the runs run %d resumes: %w", run, err)
	}
	return ids, nil
}
