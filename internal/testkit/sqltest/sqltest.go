// Package sqltest checks statements held as text (internal/infra/sqltext)
// and prepared once (a package's sql/<name>.sql, rendered for a schema):
// their golden renderings, that every file is used, and that each plans
// on PostgreSQL. claims, which may not import sqltext (it depends on
// nothing of the daemon), renders its files with text/template alone and
// numbers their parameters by hand: ByHand makes them statements these
// checks take.
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

	"github.com/enginehealth/enginehealth/internal/infra/sqltext"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/jmoiron/sqlx"
)

// Name of a statement loaded from sql/<name>.sql.
func Name(p sqltext.Prepared) string {
	return strings.TrimSuffix(strings.TrimPrefix(p.Name(), "sql/"), ".sql")
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

// Part is a part of a statement (sqltext's Template.Part, whose slots
// held sqltext.Arg marks for the caller's parameters) as the statement it
// is set in would number it, named as its file (sql/<name>.sql), for
// Golden and Plans.
func Part(t *testing.T, name, part string) sqltext.Prepared {
	t.Helper()
	p, err := sqltext.New("sql/"+name+".sql", "{{.Part}}").Prepare(struct{ Part string }{part})
	if err != nil {
		t.Fatal(err)
	}
	return p
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

// headerParam: a parameter numbered by hand in a file's header comment
// ("  $1  node  the node").
var headerParam = regexp.MustCompile(`(?m)^\s*\$(\d+)\s+(\w+)`)

// placeholder: a parameter in SQL text.
var placeholder = regexp.MustCompile(`\$(\d+)`)

// ByHand is sql/<name>.sql of fsys, a template whose parameters are
// numbered by hand ($1, $2, …) and listed in its header comment in that
// order ("  $1  node  the node"), rendered with slots as a Prepared whose
// Names are the header's, then more (the parameters of SQL the slots
// hold, numbered on from the header's), for Golden and Plans. It fails
// unless sqltext finds the slots right (a slot the text names that slots
// lacks, or a field of slots it never names), rendered (the package's
// own rendering, by text/template) is the same text but for a last
// newline, the header lists
// $1…$n in order, and the text uses each parameter named and no other.
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
