// Package sqltest checks statements held as text (internal/infra/sqltext)
// and prepared once (a package's sql/<name>.sql, rendered for a schema):
// their golden renderings, that every file is used, and that each plans
// on PostgreSQL.
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

// Name of a statement loaded from sql/<name>.sql.
func Name(p sqltext.Prepared) string {
	return strings.TrimSuffix(strings.TrimPrefix(p.Name(), "sql/"), ".sql")
}

// Golden compares each statement, by name, as it runs (its parameters
// in a header, then its SQL) with dir/<name>.sql; update rewrites them. A
// golden file of no statement fails.
func Golden(t *testing.T, dir string, statements map[string]sqltext.Prepared, update bool) {
	t.Helper()
	for name, p := range statements {
		got := "-- " + name + "\n" + p.Header() + strings.TrimRight(p.SQL, "\n") + "\n"
		testkit.Golden(t, filepath.Join(dir, name+".sql"), got, update)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := statements[strings.TrimSuffix(filepath.Base(f), ".sql")]; !ok {
			t.Errorf("%s: no such statement (delete it)", f)
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
