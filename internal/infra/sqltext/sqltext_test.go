package sqltext

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

type moveSlots struct {
	Table, Status string
	Claimable     bool
}

func (s moveSlots) Unclaimed(alias string) string { return alias + ".claimed_by IS NULL" }

var move = New("move", `UPDATE {{.Table}} AS t SET {{.Status}} = {{arg "to"}}
WHERE t.{{.Status}} = {{arg "from"}}{{if .Claimable}} AND {{.Unclaimed "t"}}{{end}} AND {{arg "to"}} <> ''`)

func TestRenderNumbersParametersByFirstUse(t *testing.T) {
	st, err := move.Render(moveSlots{Table: `"app"."orders"`, Status: `"state"`, Claimable: true}, Args{"from": "b", "to": "c"})
	if err != nil {
		t.Fatal(err)
	}
	want := `UPDATE "app"."orders" AS t SET "state" = $1
WHERE t."state" = $2 AND t.claimed_by IS NULL AND $1 <> ''`
	if st.SQL != want {
		t.Fatalf("rendered\n%s\nwant\n%s", st.SQL, want)
	}
	if !slices.Equal(st.Names, []string{"to", "from"}) || !slices.Equal(st.Args, []any{"c", "b"}) {
		t.Fatalf("names %v args %v", st.Names, st.Args)
	}
	if h := st.Header(); h != "-- $1 to\n-- $2 from\n" {
		t.Fatalf("header %q", h)
	}
}

func TestRenderRefusesDrift(t *testing.T) {
	type lacking struct{ Table, Status string } // no Claimable, no Unclaimed
	type extra struct {
		moveSlots
		Schema string
	}
	for _, c := range []struct {
		name  string
		slots any
		args  Args
		want  string
	}{
		{"a slot the struct lacks", lacking{Table: "t", Status: "s"}, Args{"from": "a", "to": "b"}, "names slot Claimable"},
		{"a field the text never names", extra{Schema: "x"}, Args{"from": "a", "to": "b"}, "sqltext.extra's Schema is never named by the text"},
		{"a parameter not given", moveSlots{Table: "t", Status: "s"}, Args{"to": "b"}, "parameters from are used but not given"},
		{"a parameter not used", moveSlots{Table: "t", Status: "s"}, Args{"from": "a", "to": "b", "run": 1}, "parameters run are given but not used"},
	} {
		_, err := move.Render(c.slots, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "move") {
			t.Errorf("%s: %v, want an error naming the statement and saying %q", c.name, err, c.want)
		}
	}
	// Inside a range, dot is an element: its fields are not slots, and
	// the slots are $.Name.
	each := New("each", `SELECT {{range .Columns}}{{.Name}}, {{end}}{{range .Columns}}{{$.Table}}.x{{end}} FROM {{$.Table}}`)
	type column struct{ Name string }
	if _, err := each.Render(struct {
		Columns []column
		Table   string
	}{[]column{{"a"}}, "t"}, nil); err != nil {
		t.Errorf("a field of a range's element, a slot named $.Table: %v, want none", err)
	}
	if _, err := each.Render(struct {
		Columns []column
		Table   string
		Name    string
	}{[]column{{"a"}}, "t", "n"}, nil); err == nil || !strings.Contains(err.Error(), "Name is never named") {
		t.Errorf("a slot named only as a range element's field: %v, want it never named", err)
	}
	// Slots promoted from an embedded struct count as the struct's own.
	if _, err := move.Render(extra{Schema: "x"}, Args{"from": "a", "to": "b"}); err == nil || strings.Contains(err.Error(), "lacks") {
		t.Errorf("embedded slots: %v, want only the unnamed Schema", err)
	}
}

func TestMalformedTemplatePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted a malformed template")
		}
	}()
	New("bad", "SELECT {{.A")
}

// TestPrepareThenBind: a statement prepared once binds its parameters'
// values by name, in $n order, and refuses a parameter missing or
// unused, as Render does.
func TestPrepareThenBind(t *testing.T) {
	p, err := move.Prepare(moveSlots{Table: `"app"."orders"`, Status: `"state"`})
	if err != nil {
		t.Fatal(err)
	}
	if want := "UPDATE \"app\".\"orders\" AS t SET \"state\" = $1\nWHERE t.\"state\" = $2 AND $1 <> ''"; p.SQL != want {
		t.Fatalf("prepared\n%s\nwant\n%s", p.SQL, want)
	}
	if p.Name() != "move" || p.Header() != "-- $1 to\n-- $2 from\n" {
		t.Fatalf("name %q header %q", p.Name(), p.Header())
	}
	args, err := p.Bind(Args{"from": "b", "to": "c"})
	if err != nil || !slices.Equal(args, []any{"c", "b"}) {
		t.Fatalf("bound %v, %v; want [c b]", args, err)
	}
	for _, c := range []struct {
		args Args
		want string
	}{
		{Args{"to": "c"}, "parameters from are used but not given"},
		{Args{"from": "b", "to": "c", "run": 1, "at": 2}, "parameters at, run are given but not used"},
	} {
		if _, err := p.Bind(c.args); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "move") {
			t.Errorf("%v: %v, want an error naming the statement and saying %q", c.args, err, c.want)
		}
	}
	// Run with a parameter missing, it fails before it reaches the
	// database.
	if _, err := p.Exec(context.Background(), nil, Args{"to": "c"}); err == nil || !strings.Contains(err.Error(), "from") {
		t.Errorf("Exec without from: %v", err)
	}
	if _, err := move.Prepare(struct{ Table string }{"t"}); err == nil {
		t.Error("Prepare accepted slots that lack what the text names")
	}
}

// TestFragmentKeepsParametersNamed: a fragment's parameters are numbered
// by the statement it is a slot of, with the statement's own, in the
// order they first appear there; its slots are checked as a statement's.
func TestFragmentKeepsParametersNamed(t *testing.T) {
	join := New("join", `JOIN {{.Table}} AS c ON c.id = t.id AND c.node = {{arg "node"}}`)
	f, err := join.Fragment(struct{ Table string }{`"app"."claims"`})
	if err != nil {
		t.Fatal(err)
	}
	outer := New("outer", `SELECT 1 FROM t {{.Join}} WHERE t.state = {{arg "from"}} AND c.node <> {{arg "node"}}`)
	st, err := outer.Render(struct{ Join string }{f}, Args{"from": "a", "node": "n"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `SELECT 1 FROM t JOIN "app"."claims" AS c ON c.id = t.id AND c.node = $1 WHERE t.state = $2 AND c.node <> $1`; st.SQL != want {
		t.Fatalf("rendered\n%s\nwant\n%s", st.SQL, want)
	}
	if !slices.Equal(st.Names, []string{"node", "from"}) {
		t.Fatalf("names %v", st.Names)
	}
	if _, err := join.Fragment(struct{ Table, Extra string }{"t", "x"}); err == nil || !strings.Contains(err.Error(), "Extra is never named") {
		t.Errorf("a slot the fragment never names: %v", err)
	}
}

// TestFilesKeepWhatTheyRender: a package's statements prepared once are
// kept, and so are the names of the fragments rendered, for its tests.
func TestFilesKeepWhatTheyRender(t *testing.T) {
	f := NewFiles(fstest.MapFS{
		"sql/columns.sql": {Data: []byte("{{/* the columns */ -}}\nid, {{.Extra}}\n")},
		"sql/get.sql":     {Data: []byte(`SELECT {{.Columns}} FROM {{.Table}} WHERE id = {{arg "id"}}`)},
	})
	cols := f.MustFragment("columns", struct{ Extra string }{"state"})
	p := f.MustPrepare("get", struct{ Columns, Table string }{cols, "t"})
	if p.SQL != "SELECT id, state FROM t WHERE id = $1" || p.Name() != "sql/get.sql" {
		t.Fatalf("prepared %q, named %q", p.SQL, p.Name())
	}
	if len(f.All) != 1 || f.All[0].SQL != p.SQL || !slices.Equal(f.Fragments, []string{"columns"}) {
		t.Fatalf("kept %v and fragments %v", f.All, f.Fragments)
	}
}

// TestIdent: each part is quoted as a whole (a dot or a quote inside a
// part stays in it), and no other code of the module quotes an
// identifier itself (but claims, the library engines import,
// which may not import the daemon's packages).
func TestIdent(t *testing.T) {
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"enginehealth", "runs"}, `"enginehealth"."runs"`},
		{[]string{"my.schema", "runs"}, `"my.schema"."runs"`},
		{[]string{`Od"d`}, `"Od""d"`},
		{[]string{"App", "Orders"}, `"App"."Orders"`},
	} {
		if got := Ident(c.parts...); got != c.want {
			t.Errorf("Ident(%q) = %s, want %s", c.parts, got, c.want)
		}
	}
	// The module's files, read through an fs.FS rooted at the module.
	module := os.DirFS(filepath.Join("..", "..", ".."))
	err := fs.WalkDir(module, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (d.Name() == "test-output" || d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) {
			return fs.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || path == "internal/infra/sqltext/sqltext.go" || strings.HasPrefix(path, "claims/") {
			return nil
		}
		b, err := fs.ReadFile(module, path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "pq."+"QuoteIdentifier(") {
			t.Errorf("%s quotes an identifier itself: use sqltext.Ident", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
