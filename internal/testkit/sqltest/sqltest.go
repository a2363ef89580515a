// Package sqltest checks statements held as text (internal/infra/sqltext):
// those prepared once (a package's sql/<name>.sql, rendered for a schema;
// Golden, Plans) and the shapes of those rendered with slots for a fixed
// configuration (Shape; GoldenShapes, PlanShapes): their golden
// renderings, that every file is used, and that each plans on
// PostgreSQL.
package sqltest

import (
	"context"
	"embed"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit"
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
	title = strings.ReplaceAll("-- "+strings.ReplaceAll(title, "\n", "\n-- "), "-- \n", "--\n")
	return title + "\n" + header + strings.TrimRight(sql, "\n") + "\n"
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
	// Statement is the statement's name (its file's, sql/<statement>.sql);
	// Name the shape's, "" for a statement of one shape; About what the
	// shape is for.
	Statement, Name, About string
	// Rendered holds its SQL and parameters' values.
	Rendered sqltext.Statement
	// Indexes its plan uses, by a prefix of their names (PlanShapes).
	Indexes []string
	// Scans lists the tables it reads whole on purpose, as the plan names
	// them: a sequential scan of them is no fault (PlanShapes).
	Scans []string
}

// String returns the statement's name and the shape's, if any.
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

// ByName maps statements loaded from sql/<name>.sql by their names
// (Name), as Golden and Plans take them.
func ByName(ps ...sqltext.Prepared) map[string]sqltext.Prepared {
	m := make(map[string]sqltext.Prepared, len(ps))
	for _, p := range ps {
		m[Name(p)] = p
	}
	return m
}

// Fragment is a fragment of a statement (sqltext's Template.Fragment,
// whose slots held sqltext.Arg marks for the parameters of the statement
// that holds it) numbered as that statement would number it, named as
// its file (sql/<name>.sql), for Golden and Plans.
func Fragment(t *testing.T, name, fragment string) sqltext.Prepared {
	t.Helper()
	p, err := sqltext.New("sql/"+name+".sql", "{{.Fragment}}").Prepare(struct{ Fragment string }{fragment})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// headerParam matches a parameter numbered by hand in a file's header comment
// ("  $1  node  the node").
var headerParam = regexp.MustCompile(`(?m)^\s*\$(\d+)\s+(\w+)`)

// placeholder matches a parameter in SQL text.
var placeholder = regexp.MustCompile(`\$(\d+)`)

// ByHand is sql/<name>.sql of fsys, a template whose parameters are
// numbered by hand ($1, $2, …) and listed in its header comment in that
// order ("  $1  node  the node"), rendered with slots as a Prepared whose
// Names are the header's, then more (the parameters of SQL the slots
// hold, numbered on from the header's), for Golden and Plans. It fails
// unless sqltext finds the slots right (a slot the text names that slots
// lacks, or a field of slots it never names), rendered (the package's
// own rendering, by text/template) is the same text but for a last
// newline, the header lists $1…$n in order, and the text uses each
// parameter named and no other. claims renders its files so: it may not
// import sqltext (it depends on nothing of the daemon).
func ByHand(t *testing.T, fsys embed.FS, name string, slots any, rendered string, more ...string) sqltext.Prepared {
	t.Helper()
	file := "sql/" + name + ".sql"
	p, err := sqltext.Load(fsys, file).Prepare(slots)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimRight(p.SQL, "\n") != strings.TrimRight(rendered, "\n") {
		t.Fatalf("%s: text/template and sqltext render differently:\n%s\n\n%s", file, rendered, p.SQL)
	}
	text, err := fsys.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(string(text), "*/")
	for i, m := range headerParam.FindAllStringSubmatch(header, -1) {
		if m[1] != strconv.Itoa(i+1) {
			t.Fatalf("%s: its header lists $%s where $%d is due", file, m[1], i+1)
		}
		p.Names = append(p.Names, m[2])
	}
	p.Names = append(p.Names, more...)
	used := map[string]bool{}
	for _, m := range placeholder.FindAllStringSubmatch(p.SQL, -1) {
		used[m[1]] = true
	}
	for i := range p.Names {
		if !used[strconv.Itoa(i+1)] {
			t.Errorf("%s: $%d (%s) is not used by the text", file, i+1, p.Names[i])
		}
		delete(used, strconv.Itoa(i+1))
	}
	for n := range used {
		t.Errorf("%s: the text uses $%s, which is not named", file, n)
	}
	return p
}
