package recovery

import (
	"context"
	"fmt"
	"math"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// RetryStats sums up the attempts rows of one workflow and task.
type RetryStats struct {
	Workflow string `db:"workflow"`
	Task     string `db:"task"`
	// Instances counts attempts rows (instances a policy or an operator acted
	// on); Retried: those retried at least once.
	Instances int64 `db:"instances"`
	Retried   int64 `db:"retried"`
	// Scheduled counts retries made or scheduled by the policies (each
	// counted once); Manual: retries made by operators.
	Scheduled int64 `db:"scheduled"`
	Manual    int64 `db:"manual"`
	// Waiting counts retries scheduled and not yet due or run.
	Waiting int64 `db:"waiting"`
	// Succeeded counts instances whose last retry ran and then succeeded
	// (settled by the check: the instance reached one of the task's end
	// states or went on past the task, or it is in one of the end states
	// now).
	Succeeded int64 `db:"succeeded"`
	// Exhausted counts those failed for good after max_attempts; Failed: failed for
	// good otherwise (non_retryable, an operator's holds fail); HoldsOpen:
	// held now.
	Exhausted int64 `db:"exhausted"`
	Failed    int64 `db:"failed"`
	// Cancelled counts instances whose retry or hold was cancelled without
	// running: someone else finished the instance (it reached an end
	// state) or moved it meanwhile, it is gone, or the policy no longer
	// allows the retry. Not a success, and not in SuccessRate.
	Cancelled int64 `db:"cancelled"`
	HoldsOpen int64 `db:"held"`
	// SuccessRate is, of the instances whose retry ran and whose outcome is
	// known, those that succeeded: Succeeded / (Succeeded + the Exhausted
	// and Failed after at least one retry); nil before any.
	SuccessRate *float64
}

// RetryStats returns the retry statistics of every configured task that
// has attempts rows, by workflow and task. Succeeded counts the settled
// retries and those in an end state since the last pass (one
// primary-key probe per retried instance).
func (r *Repairer) RetryStats(ctx context.Context) ([]RetryStats, error) {
	out := []RetryStats{}
	cursors, err := r.settleCursors(ctx)
	if err != nil {
		return nil, err
	}
	for _, w := range r.cfg.Workflows {
		idType, err := r.idType(ctx, w)
		if err != nil {
			return nil, err
		}
		sl, err := r.statsSlots(w, idType)
		if err != nil {
			return nil, err
		}
		stats, err := retryStatsSQL.Prepare(sl)
		if err != nil {
			return nil, err
		}
		for _, t := range w.Tasks {
			var row struct {
				RetryStats
				// Ran counts the instances failed for good after at least one
				// retry (exhausted, failed).
				Ran int64 `db:"ran"`
			}
			// Without a cursor, no retry at once of the task went
			// without its row: none after the newest event.
			c, ok := cursors[[2]string{w.Name, t.Name}]
			after := c.After
			if !ok {
				after = math.MaxInt64
			}
			err := stats.Get(ctx, r.cfg.DB, &row, sqltext.Args{"workflow": w.Name, "task": t.Name, "ends": pq.Array(t.Ends), "after": after})
			if err != nil {
				return nil, fmt.Errorf("retry stats of %s.%s: %w", w.Name, t.Name, err)
			}
			s := row.RetryStats
			if s.Instances == 0 {
				continue
			}
			// Retries that ran: those that then succeeded (a succeeded row
			// not closed while parked was settled after a retry), and the
			// instances failed for good after at least one.
			if ran := s.Succeeded + row.Ran; ran > 0 {
				rate := float64(s.Succeeded) / float64(ran)
				s.SuccessRate = &rate
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// retryStatsSQL is the statement of RetryStats (sql/retry_stats.sql).
var retryStatsSQL = load("retry_stats")

// statsSlots fill retryStatsSQL: the instance table and its columns,
// quoted, the id column's type (the catalog's name), the sidecar's
// tables, quoted, and the event kinds, as literals.
type statsSlots struct{ Table, ID, IDType, Status, Attempts, Events, KindRepair, OpenCase string }

func (r *Repairer) statsSlots(w Workflow, idType string) (statsSlots, error) {
	open, err := r.openCase("e")
	return statsSlots{Table: claims.Ident(w.Table), ID: claims.Ident(w.IDColumn), IDType: idType, Status: claims.Ident(w.StatusColumn),
		Attempts: r.attempts, Events: r.cfg.Events.Table(), KindRepair: pq.QuoteLiteral(string(audit.KindRepair)), OpenCase: open}, err
}
