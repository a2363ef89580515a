package sqltext

import (
	"context"
	"slices"
	"strings"
	"testing"
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

// TestPart: a part renders with its slots checked, its parameters left
// for the statement it is set in, which numbers them with its own; the
// file's last newline goes.
func TestPart(t *testing.T) {
	unclaimed := New("unclaimed", "NOT EXISTS (SELECT 1 FROM {{.Claims}} c WHERE c.instance = {{.Alias}}.id AND c.node = {{arg \"node\"}})\n")
	part, err := unclaimed.Part(struct{ Claims, Alias string }{`"app"."claims"`, "t"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `NOT EXISTS (SELECT 1 FROM "app"."claims" c WHERE c.instance = t.id AND c.node = ` + Arg("node") + `)`; part != want {
		t.Fatalf("part %q, want %q", part, want)
	}
	st, err := New("count", "SELECT count(*) FROM t WHERE t.status = {{arg \"from\"}} AND {{.Unclaimed}}").
		Render(struct{ Unclaimed string }{part}, Args{"from": "a", "node": "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `SELECT count(*) FROM t WHERE t.status = $1 AND NOT EXISTS (SELECT 1 FROM "app"."claims" c WHERE c.instance = t.id AND c.node = $2)`; st.SQL != want ||
		!slices.Equal(st.Names, []string{"from", "node"}) {
		t.Fatalf("rendered %s with %v", st.SQL, st.Names)
	}
	if _, err := unclaimed.Part(struct{ Claims string }{"c"}); err == nil || !strings.Contains(err.Error(), "names slot Alias") {
		t.Errorf("Part with slots that lack Alias: %v", err)
	}
}
