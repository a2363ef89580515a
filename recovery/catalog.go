package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
)

// CatalogError lists the configured tables and columns the database lacks.
type CatalogError struct {
	Problems []string
}

// Error lists the problems, one a line.
func (e *CatalogError) Error() string {
	return "the workflows do not match the database:\n  - " + strings.Join(e.Problems, "\n  - ")
}

// CheckCatalog verifies that every configured instance and claims table
// and every named column exists, as the database resolves the names. It
// returns a *CatalogError naming each missing one by its key path.
func CheckCatalog(ctx context.Context, db Reader, wfs []Workflow) error {
	var problems []string
	check := func(path, table string, cols map[string]string) error {
		var exists bool
		if err := catalog.tableExists.Get(ctx, db, &exists, sqltext.Args{"table": claims.Ident(table)}); err != nil {
			return fmt.Errorf("look up %s: %w", table, err)
		}
		if !exists {
			problems = append(problems, fmt.Sprintf("%s: table %s does not exist (or is not visible to this user)", path, table))
			return nil
		}
		var have []string
		if err := catalog.tableColumns.Select(ctx, db, &have, sqltext.Args{"table": claims.Ident(table)}); err != nil {
			return fmt.Errorf("list columns of %s: %w", table, err)
		}
		set := map[string]bool{}
		for _, c := range have {
			set[c] = true
		}
		for key, col := range cols {
			if col != "" && !set[col] {
				problems = append(problems, fmt.Sprintf("%s: table %s has no column %q", key, table, col))
			}
		}
		return nil
	}
	for i, w := range wfs {
		p := fmt.Sprintf("workflows[%d]", i)
		if err := check(p+".table", w.Table, map[string]string{
			p + ".id_column": w.IDColumn, p + ".status_column": w.StatusColumn, p + ".error_column": w.ErrorColumn,
			p + ".updated_column": w.UpdatedColumn,
		}); err != nil {
			return err
		}
		// non_retryable patterns are matched by PostgreSQL in the repair
		// statement: each must compile there too.
		for j, t := range w.Tasks {
			for _, pol := range []struct {
				name string
				p    Policy
			}{{"on_interrupt", t.OnInterrupt}, {"on_failure", t.OnFailure}} {
				for k, pat := range pol.p.NonRetryable {
					var ok bool
					var pqErr *pq.Error
					pg, err := PGPattern(pat)
					if err != nil {
						problems = append(problems, fmt.Sprintf("%s.tasks[%d].%s.non_retryable[%d]: %v", p, j, pol.name, k, err))
						continue
					}
					err = catalog.patternCompiles.Get(ctx, db, &ok, sqltext.Args{"pattern": pg})
					switch {
					case errors.As(err, &pqErr) && pqErr.Code.Class() == "22": // data exception: the pattern
						problems = append(problems, fmt.Sprintf("%s.tasks[%d].%s.non_retryable[%d]: PostgreSQL cannot match this pattern: %s",
							p, j, pol.name, k, pqErr.Message))
					case err != nil:
						return fmt.Errorf("check pattern: %w", err)
					}
				}
			}
		}
		if len(FailureTasks([]Workflow{w})) > 0 && w.UpdatedColumn != "" {
			ps, err := checkUpdatedColumn(ctx, db, p, w)
			if err != nil {
				return err
			}
			problems = append(problems, ps...)
		}
		if c := w.Claims; c != nil {
			cp := p + ".claims"
			if err := check(cp+".table", c.Claims, map[string]string{
				cp + ".instance_column": c.InstanceColumn, cp + ".node_column": c.NodeColumn, cp + ".token_column": c.TokenColumn,
				cp + ".claimed_at_column": c.ClaimedAtColumn, cp + ".expires_at_column": c.ExpiresAtColumn,
			}); err != nil {
				return err
			}
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return &CatalogError{Problems: problems}
	}
	return nil
}

// checkUpdatedColumn checks what an on_failure policy needs of the
// workflow's updated_column: a timestamp, and an index on (status_column,
// updated_column) through which new failures are read without scanning
// old ones.
func checkUpdatedColumn(ctx context.Context, db Reader, p string, w Workflow) ([]string, error) {
	var c struct {
		Type    *string `db:"type"`
		Indexed bool    `db:"indexed"`
	}
	err := catalog.updatedColumn.Get(ctx, db, &c, sqltext.Args{"table": claims.Ident(w.Table), "status": w.StatusColumn, "updated": w.UpdatedColumn})
	if err != nil {
		return nil, fmt.Errorf("check %s.updated_column: %w", p, err)
	}
	if c.Type == nil {
		return nil, nil // a missing column is reported already
	}
	var ps []string
	if *c.Type != "timestamp with time zone" && *c.Type != "timestamp without time zone" {
		ps = append(ps, fmt.Sprintf("%s.updated_column: column %q of %s is %s: an on_failure policy needs a timestamp (timestamptz)",
			p, w.UpdatedColumn, w.Table, *c.Type))
	}
	if !c.Indexed {
		ps = append(ps, fmt.Sprintf("%s.updated_column: an on_failure policy reads new failures through a valid B-tree index on (%s, %s), which %s lacks: CREATE INDEX ON %s (%s, %s)",
			p, w.StatusColumn, w.UpdatedColumn, w.Table, claims.Ident(w.Table), claims.Ident(w.StatusColumn), claims.Ident(w.UpdatedColumn)))
	}
	return ps, nil
}
