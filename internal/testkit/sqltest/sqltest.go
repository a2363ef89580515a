// Package sqltest checks statements held as text (internal/infra/sqltext):
// those prepared once (a package's sql/<name>.sql, rendered for a schema;
// Golden, Plans) and the shapes of those rendered with slots for a fixed
// configuration (Shape; GoldenShapes, PlanShapes): their golden
// renderings, that every file is used, and that each plans on
// PostgreSQL.
package sqltest

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/jmoiron/sqlx"
)

// Name of a statement loaded from sql/<name>.sql (a Prepared, or its
// Template).
func Name(p interface{ Name() string }) string {
	return strings.TrimSuffix(strings.TrimPrefix(p.Name(), "sql/"), ".sql")
}

// Golden compares each statement, by name, as it runs (its parameters
// in a header, then its SQL) with dir/<name>.sql; update rewrites them. A
// golden file of no statement fails.
func Golden(t *testing.T, dir string, statements map[string]sqltext.Prepared, update bool) {
	t.Helper()
	var paths []string
	for name, p := range statements {
		path := filepath.Join(dir, name+".sql")
		testkit.Golden(t, path, golden(name, p.Header(), p.SQL), update)
		paths = append(paths, path)
	}
	strays(t, paths, filepath.Join(dir, "*.sql"))
}

// golden is a statement as its golden file shows it: a comment line
// (title), its parameters (header), then its SQL.
func golden(title, header, sql string) string {
	return "-- " + title + "\n" + header + strings.TrimRight(sql, "\n") + "\n"
}

// strays fails on a file matching one of globs that is not among paths:
// a golden file of no statement.
func strays(t *testing.T, paths []string, globs ...string) {
	t.Helper()
	for _, g := range globs {
		files, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !slices.Contains(paths, f) {
				t.Errorf("%s: no such statement (delete it)", f)
			}
		}
	}
}

// Shape is one rendering of a statement with the values of its
// parameters: a template over the engines' tables rendered for a fixed
// configuration (a statement has a shape for each switch of its text
// worth reading), or a statement prepared once, bound to values of the
// types the code gives them.
type Shape struct {
	// Statement: the statement's name (its file's, sql/<statement>.sql);
	// Name: the shape's, "" for a statement of one shape; About: what
	// the shape is for.
	Statement, Name, About string
	// Rendered: its SQL and parameters' values.
	Rendered sqltext.Statement
	// Indexes its plan uses, by a prefix of their names (PlanShapes).
	Indexes []string
	// Scans: the tables it reads whole on purpose, as the plan names
	// them: a sequential scan of them is no fault (PlanShapes).
	Scans []string
}

func (s Shape) String() string { return strings.TrimSuffix(s.Statement+" "+s.Name, " ") }

// path of the shape's golden file under dir: dir/<statement>.sql for a
// statement of one shape, dir/<statement>/<name>.sql for one of several.
func (s Shape) path(dir string) string {
	if s.Name == "" {
		return filepath.Join(dir, s.Statement+".sql")
	}
	return filepath.Join(dir, s.Statement, s.Name+".sql")
}

// GoldenShapes compares each shape, as it runs (a comment "statement:
// about", its parameters, its SQL), with its file under dir (Shape.path);
// update rewrites them. Two shapes of one file, or a golden file of no
// shape (dir/*.sql, dir/*/*.sql), fail.
func GoldenShapes(t *testing.T, dir string, shapes []Shape, update bool) {
	t.Helper()
	var paths []string
	for _, s := range shapes {
		path := s.path(dir)
		if slices.Contains(paths, path) {
			t.Errorf("%s: two shapes of one golden file %s", s, path)
			continue
		}
		paths = append(paths, path)
		title := s.Statement
		if s.About != "" {
			title += ": " + s.About
		}
		testkit.Golden(t, path, golden(title, s.Rendered.Header(), s.Rendered.SQL), update)
	}
	strays(t, paths, filepath.Join(dir, "*.sql"), filepath.Join(dir, "*", "*.sql"))
}

// PlanShapes EXPLAINs each shape on db with its parameters' values and
// sequential scans off: a shape that does not plan, whose plan scans a
// table sequentially but those of its Scans (no index serves the read),
// or that does not use each of its Indexes fails.
func PlanShapes(t *testing.T, db *sqlx.DB, shapes []Shape) {
	t.Helper()
	ctx := context.Background()
	for _, s := range shapes {
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		_, err = tx.ExecContext(ctx, `SET LOCAL enable_seqscan = off`)
		if err == nil {
			err = tx.SelectContext(ctx, &lines, "EXPLAIN "+s.Rendered.SQL, s.Rendered.Args...)
		}
		_ = tx.Rollback()
		if err != nil {
			t.Errorf("%s does not plan: %v", s, err)
			continue
		}
		plan := strings.Join(lines, "\n")
		for _, l := range lines {
			_, table, seq := strings.Cut(l, "Seq Scan on ")
			if table, _, _ = strings.Cut(table, " "); seq && !slices.Contains(s.Scans, table) {
				t.Errorf("%s scans %s sequentially although sequential scans are off (no index serves it):\n%s", s, table, plan)
			}
		}
		for _, index := range s.Indexes {
			if !strings.Contains(plan, "using "+index) && !strings.Contains(plan, "Index Scan on "+index) {
				t.Errorf("%s does not use the index %s…:\n%s", s, index, plan)
			}
		}
	}
}

// FilesUsed fails on a file of fsys's sql/ whose name (sql/<name>.sql)
// is not among used: one left behind when its statement went.
func FilesUsed(t *testing.T, fsys fs.FS, used []string) {
	t.Helper()
	names, err := fs.Glob(fsys, "sql/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range names {
		if n := strings.TrimSuffix(strings.TrimPrefix(f, "sql/"), ".sql"); !slices.Contains(used, n) {
			t.Errorf("%s is not used", f)
		}
	}
}

// Plans EXPLAINs each statement on db with the parameters args[name] (of
// the types the code gives them): a statement without args, or one that
// does not plan, fails.
func Plans(t *testing.T, db sqlx.QueryerContext, statements map[string]sqltext.Prepared, args map[string]sqltext.Args) {
	t.Helper()
	for name, p := range statements {
		a, ok := args[name]
		if !ok {
			t.Errorf("%s: no parameters to plan it with", name)
			continue
		}
		values, err := p.Bind(a)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var plan []string
		if err := sqlx.SelectContext(context.Background(), db, &plan, "EXPLAIN "+p.SQL, values...); err != nil {
			t.Errorf("%s does not plan: %v", name, err)
		}
	}
}
