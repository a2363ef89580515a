package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// CatalogError lists the configured tables and columns the database lacks.
type CatalogError struct {
	Problems []string
}

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
		if err := sqlx.GetContext(ctx, db, &exists, `SELECT to_regclass($1) IS NOT NULL`, claims.Ident(table)); err != nil {
			return fmt.Errorf("look up %s: %w", table, err)
		}
		if !exists {
			problems = append(problems, fmt.Sprintf("%s: table %s does not exist (or is not visible to this user)", path, table))
			return nil
		}
		var have []string
		if err := sqlx.SelectContext(ctx, db, &have, `SELECT attname::text FROM pg_attribute
			WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped`, claims.Ident(table)); err != nil {
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
			for k, pat := range t.OnInterrupt.NonRetryable {
				var ok bool
				var pqErr *pq.Error
				err := sqlx.GetContext(ctx, db, &ok, `SELECT '' ~ $1`, pat)
				switch {
				case errors.As(err, &pqErr) && pqErr.Code.Class() == "22": // data exception: the pattern
					problems = append(problems, fmt.Sprintf("%s.tasks[%d].on_interrupt.non_retryable[%d]: PostgreSQL cannot match this pattern: %s",
						p, j, k, pqErr.Message))
				case err != nil:
					return fmt.Errorf("check pattern: %w", err)
				}
			}
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
