package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// apitype holds the API's request and answer types: the one package
// whose structs carry json tags, but for the formats of jsonFormats.
const apitype = "internal/app/api/apitype"

// jsonFormats: the structs outside apitype whose fields may carry json
// tags, each with why. Their JSON is a format of its own (stored,
// exchanged between nodes, built by a statement, printed by the CLI
// from what it reads itself), not an answer of the API, which converts
// the domain's types into apitype's (internal/app/api/wire.go).
var jsonFormats = map[string]string{
	"leader.Candidate":     "the etcd election value other nodes read (embedded in electionValue)",
	"leader.electionValue": "the etcd election value: the candidate and its trust window",
	"recovery.Scope":       "the runs table's scope column holds its JSON",
	"recovery.repairedInstance": "the JSON rows the repair batch's statement builds (sql/policy_batch.sql) " +
		"for the debug log",
	"internal/infra/pgdb.MigrationStatus": "migrate --status -o json: the CLI's report of the schema, read from the database",
	"internal/infra/pgdb.MigrationState":  "in MigrationStatus (migrate --status -o json)",
	"internal/infra/pgdb.ClusterState":    "in MigrationStatus (migrate --status -o json)",
	"internal/infra/pgdb.NodeSchema":      "in MigrationStatus (migrate --status -o json)",
	"cmd/enginehealth.statusReport":       "status -o json: the CLI's document, which wraps the API's answers",
	"internal/infra/leasefile.Record":     "the lease file in the state directory, which enginehealth release-lease reads",
	"internal/infra/leasefile.Process":    "in Record (the lease file): the process that wrote it",
}

// TestJSONTagsOnlyInAPIType: a struct field with a json tag is declared
// only in apitype, or in a format of jsonFormats: the domain's types
// (nodes, recovery, health, leader, claims, audit...) and the API's
// handlers carry none, so that the API's JSON is apitype's, written in
// one place. Every entry of jsonFormats is still needed.
func TestJSONTagsOnlyInAPIType(t *testing.T) {
	root := moduleRoot(t)
	found := map[string]bool{}
	apitypeTagged := 0
	for _, dir := range packageDirs(t) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			tagged, err := jsonTagged(f, src)
			if err != nil {
				t.Fatal(err)
			}
			for _, typ := range tagged {
				key := rel + "." + typ
				found[key] = true
				if rel == apitype {
					apitypeTagged++
					continue
				}
				if err := wireRule(rel, typ); err != nil {
					t.Errorf("%s: %v", filepath.Join(rel, filepath.Base(f)), err)
				}
			}
		}
	}
	if apitypeTagged < 20 {
		t.Fatalf("only %d json-tagged structs found in %s", apitypeTagged, apitype)
	}
	for key := range jsonFormats {
		if !found[key] {
			t.Errorf("jsonFormats names %s, which declares no json tag (any more): drop it", key)
		}
	}
}

// wireRule says why the struct typ of package p may not carry json tags
// (nil when it may).
func wireRule(p, typ string) error {
	switch {
	case p == apitype:
		return nil
	case jsonFormats[p+"."+typ] != "":
		return nil
	case p == "internal/app/api" || strings.HasPrefix(p, "internal/app/api/"):
		return fmt.Errorf("%s has json tags: the API's requests and answers are apitype's types", typ)
	case layer(p) == 2 || p == "internal/infra/audit":
		return fmt.Errorf("%s has json tags: a domain type has no JSON of its own (the API converts it into an apitype type in internal/app/api/wire.go); a file or log format is listed, with its reason, in jsonFormats", typ)
	}
	return fmt.Errorf("%s has json tags: only apitype's types have (a format of their own is listed, with its reason, in jsonFormats)", typ)
}

// jsonTagged returns the structs of a Go file with a field tagged json:
// declared types by name, a struct type written inside a declaration by
// the declaration's name.
func jsonTagged(name string, src []byte) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range f.Decls {
		names := declNames(d)
		ast.Inspect(d, func(n ast.Node) bool {
			if spec, ok := n.(*ast.TypeSpec); ok {
				names = []string{spec.Name.Name}
			}
			st, ok := n.(*ast.StructType)
			if !ok || !hasJSONTag(st) {
				return true
			}
			for _, name := range names {
				if !slices.Contains(out, name) {
					out = append(out, name)
				}
			}
			return true
		})
	}
	return out, nil
}

// declNames names what a top-level declaration declares: a function or
// method by its name (Recv.Name for a method), else its specs' names.
func declNames(d ast.Decl) []string {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv != nil && len(d.Recv.List) == 1 {
			return []string{recvName(d.Recv.List[0].Type) + "." + d.Name.Name}
		}
		return []string{d.Name.Name}
	case *ast.GenDecl:
		var names []string
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				names = append(names, s.Name.Name)
			case *ast.ValueSpec:
				for _, n := range s.Names {
					names = append(names, n.Name)
				}
			}
		}
		return names
	}
	return nil
}

// recvName is the name of a receiver's type.
func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return "?"
}

func hasJSONTag(st *ast.StructType) bool {
	for _, f := range st.Fields.List {
		if f.Tag == nil {
			continue
		}
		tag, err := strconv.Unquote(f.Tag.Value)
		if err != nil {
			continue
		}
		if _, ok := reflect.StructTag(tag).Lookup("json"); ok {
			return true
		}
	}
	return false
}

// TestJSONTagRuleCatchesViolations: the rule sees a json tag in a
// domain package, in the API's handlers and elsewhere, on a declared
// type and on a struct written in a function; it lets apitype and the
// listed formats by.
func TestJSONTagRuleCatchesViolations(t *testing.T) {
	src := []byte(`package p
type Row struct {
	ID int ` + "`db:\"id\" json:\"id\"`" + `
}
type Plain struct {
	ID int ` + "`db:\"id\"`" + `
}
func answer() any {
	return struct {
		N int ` + "`json:\"n\"`" + `
	}{1}
}
func (*Row) Body() any { return struct{ N int ` + "`json:\"n\"`" + ` }{} }
var doc = struct{ V int ` + "`json:\"v\"`" + ` }{}
`)
	got, err := jsonTagged("p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Row", "answer", "Row.Body", "doc"}; !slices.Equal(got, want) {
		t.Fatalf("json-tagged %v, want %v", got, want)
	}
	for _, c := range [][2]string{
		{"nodes", "Node"},
		{"recovery", "Result"},
		{"health", "CheckResult"},
		{"claims", "ClaimRow"},
		{"leader", "Term"},
		{"internal/infra/audit", "Event"},
		{"internal/app/api", "Status"},
		{"internal/app/demo", "answer"},
		{"recovery", "RetryResult"},
	} {
		if wireRule(c[0], c[1]) == nil {
			t.Errorf("json tags on %s.%s are allowed", c[0], c[1])
		}
	}
	for _, c := range [][2]string{
		{apitype, "Node"},
		{"leader", "Candidate"},
		{"recovery", "Scope"},
		{"cmd/enginehealth", "statusReport"},
	} {
		if err := wireRule(c[0], c[1]); err != nil {
			t.Errorf("json tags on %s.%s refused: %v", c[0], c[1], err)
		}
	}
	for key, why := range jsonFormats {
		if strings.TrimSpace(why) == "" {
			t.Errorf("jsonFormats: %s has no reason", key)
		}
	}
}

// TestBasicTypeRuleCatchesRenamedStructs: a field of apitype may hold a
// module type defined on a basic type of Go's (an enumeration), not one
// defined on another of its package's types (a domain struct renamed).
func TestBasicTypeRuleCatchesRenamedStructs(t *testing.T) {
	dir := t.TempDir()
	src := "package p\ntype Node struct{ Name string }\ntype Wire Node\ntype Status string\ntype Alias = string\n"
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, ok := range map[string]bool{"Status": true, "Wire": false, "Node": false, "Alias": false} {
		if err := basicType(dir, name); (err == nil) != ok {
			t.Errorf("%s: %v, want allowed %v", name, err, ok)
		}
	}
}

// TestAPITypeHoldsNoDomainStruct: apitype's fields are of its own
// types, the standard library's, or a module package's named basic
// type (an enumeration such as nodes.Status, whose JSON is its text):
// never a struct of the domain, whose shape would then be the API's.
func TestAPITypeHoldsNoDomainStruct(t *testing.T) {
	root := moduleRoot(t)
	files, err := filepath.Glob(filepath.Join(root, apitype, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no Go files (%v)", apitype, err)
	}
	fields := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		imports := map[string]string{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			local := filepath.Base(path)
			if imp.Name != nil {
				local = imp.Name.Name
			}
			imports[local] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			st, ok := n.(*ast.StructType)
			if !ok {
				return true
			}
			for _, fld := range st.Fields.List {
				fields++
				for _, sel := range selectors(fld.Type) {
					pkg := imports[sel.X.(*ast.Ident).Name]
					rel, ours := strings.CutPrefix(pkg, module+"/")
					if !ours || rel == "internal/infra/jsonx" {
						continue
					}
					if err := basicType(filepath.Join(root, rel), sel.Sel.Name); err != nil {
						t.Errorf("%s: a field holds %s.%s: %v", filepath.Base(name), rel, sel.Sel.Name, err)
					}
				}
			}
			return true
		})
	}
	if fields < 100 {
		t.Fatalf("only %d fields found in %s", fields, apitype)
	}
}

// selectors returns the qualified type names (pkg.Name) a type
// expression uses.
func selectors(e ast.Expr) []*ast.SelectorExpr {
	var out []*ast.SelectorExpr
	ast.Inspect(e, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if _, ok := s.X.(*ast.Ident); ok {
				out = append(out, s)
			}
			return false
		}
		return true
	})
	return out
}

// basicType says why type name of the package in dir is not a named
// basic type (nil when it is).
func basicType(dir, name string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return err
	}
	for _, fn := range files {
		if strings.HasSuffix(fn, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), fn, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				if ts := s.(*ast.TypeSpec); ts.Name.Name == name {
					// A basic type of Go's own (string, int64…), not
					// another of the package's types (type Wire Node
					// would carry a domain struct under a new name).
					if id, ok := ts.Type.(*ast.Ident); ok && ts.Assign == 0 {
						if obj, ok := types.Universe.Lookup(id.Name).(*types.TypeName); ok {
							if _, ok := obj.Type().(*types.Basic); ok {
								return nil
							}
						}
						return fmt.Errorf("defined on %s, not on a basic type: convert it into an apitype type", id.Name)
					}
					return fmt.Errorf("not a named basic type: convert it into an apitype type")
				}
			}
		}
	}
	return fmt.Errorf("no such type")
}

// moduleRoot is the module's folder.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// packageDirs are the folders of the module's packages.
func packageDirs(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-f", "{{.Dir}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return strings.Fields(string(out))
}
