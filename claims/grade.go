package claims

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/lib/pq"
)

// Failover grades of nodes, as the sidecar keeps them in its schema: a
// node whose claimed work was interrupted and repaired is WARNING; one
// whose work was interrupted twice, or finished fine on another node after
// it failed there, is ERROR; quiet nodes go back to NORMAL. A dispatcher
// prefers NORMAL nodes and avoids ERROR ones (Preferred).
const (
	GradeNormal  = "NORMAL"
	GradeWarning = "WARNING"
	GradeError   = "ERROR"
)

// ErrUnknownNode means there is no node record and no grade under that name.
var ErrUnknownNode = errors.New("claims: no such node")

// DefaultSchema is the sidecar's schema when none is given.
const DefaultSchema = "enginehealth"

// Grade returns the failover grade of node, read from the sidecar schema
// ("" for DefaultSchema). A registered node never graded is NORMAL; a
// node with a grade but no record (it shut down cleanly) has its grade,
// which comes back with it; a name with neither is ErrUnknownNode.
func Grade(ctx context.Context, db Querier, schema, node string) (string, error) {
	var g sql.NullString
	err := db.QueryRowContext(ctx, gradeStatementsOf(schema).grade.sql, node).Scan(&g)
	if err != nil {
		return "", fmt.Errorf("read the failover grade of %s: %w", node, err)
	}
	if !g.Valid {
		return "", fmt.Errorf("read the failover grade of %s: %w", node, ErrUnknownNode)
	}
	return g.String, nil
}

// Lister runs a statement that returns rows: a *sql.DB or *sql.Tx.
type Lister interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Grades returns the failover grade of every registered node, and of
// every node without a record that is WARNING or ERROR (a clean shutdown
// keeps the grade), from the sidecar schema ("" for DefaultSchema).
func Grades(ctx context.Context, db Lister, schema string) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, gradeStatementsOf(schema).grades.sql)
	if err != nil {
		return nil, fmt.Errorf("read failover grades: %w", err)
	}
	defer func() { _ = rows.Close() }() // rows.Err, checked below, reports what went wrong
	out := map[string]string{}
	for rows.Next() {
		var n, g string
		if err := rows.Scan(&n, &g); err != nil {
			return nil, fmt.Errorf("read failover grades: %w", err)
		}
		out[n] = g
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read failover grades: %w", err)
	}
	return out, nil
}

// gradeSlots fill sql/grade.sql and sql/grades.sql, the statements of
// Grade and Grades: the sidecar schema's tables, quoted.
type gradeSlots struct{ Nodes, Grades string }

// gradeStatements holds Grade's and Grades' statements for one schema.
type gradeStatements struct{ grade, grades statement }

// gradeRendered holds the gradeStatements of each schema asked for ("" and
// DefaultSchema apart), rendered once.
var gradeRendered sync.Map // schema → gradeStatements

// gradeStatementsOf returns the statements of Grade and Grades for
// schema ("" for DefaultSchema).
func gradeStatementsOf(schema string) gradeStatements {
	if st, ok := gradeRendered.Load(schema); ok {
		return st.(gradeStatements)
	}
	s := pq.QuoteIdentifier(cmp.Or(schema, DefaultSchema))
	slots := gradeSlots{Nodes: s + ".nodes", Grades: s + ".node_grades"}
	st := gradeStatements{grade: prepare("grade", slots), grades: prepare("grades", slots)}
	gradeRendered.Store(schema, st)
	return st
}

// Preferred orders candidate nodes for new work by their grades: NORMAL
// first, then WARNING, keeping the candidates' order within a grade.
// ERROR nodes are left out, unless no other candidate is left; a node
// missing from grades is ranked after WARNING.
func Preferred(grades map[string]string, candidates []string) []string {
	rank := func(n string) int {
		switch grades[n] {
		case GradeNormal:
			return 0
		case GradeWarning:
			return 1
		case GradeError:
			return 3
		}
		return 2
	}
	out := slices.Clone(candidates)
	slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(rank(a), rank(b)) })
	if i := slices.IndexFunc(out, func(n string) bool { return rank(n) == 3 }); i > 0 {
		out = out[:i]
	}
	return out
}
