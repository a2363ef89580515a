package archtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/enginehealth/enginehealth"

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Imports    []string
	// Deps: every package it depends on, directly or not.
	Deps  []string
	Error *struct{ Err string }
	// DepsErrors: errors in its dependencies (an import cycle is one).
	DepsErrors []struct {
		Err         string
		ImportStack []string
	}
}

// module's packages as go list describes them (-e: with their errors,
// an import cycle among them), relative to the module; imports and deps
// relative too, and "ext:" + path for those outside the module and the
// standard library.
type graph map[string]struct {
	imports, deps []string
	errs          []string
}

// list returns every package of the module with its non-test imports.
func list(t *testing.T) graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	std = standard(t)
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		n := g[rel(p.ImportPath)]
		n.imports, n.deps = own(p.Imports), own(p.Deps)
		if p.Error != nil {
			n.errs = append(n.errs, p.Error.Err)
		}
		for _, e := range p.DepsErrors {
			n.errs = append(n.errs, e.Err+" (via "+strings.Join(e.ImportStack, " → ")+")")
		}
		g[rel(p.ImportPath)] = n
	}
	return g
}

// std: the standard library packages the module depends on, as go list
// says (not guessed from the path).
var std map[string]bool

func standard(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-deps", "-f", "{{if .Standard}}{{.ImportPath}}{{end}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	set := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		set[p] = true
	}
	if !set["fmt"] || !set["context"] {
		t.Fatalf("go list found no standard packages: %q", out)
	}
	return set
}

func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, module), "/") }

func own(paths []string) []string {
	var out []string
	for _, imp := range paths {
		if r, ok := strings.CutPrefix(imp, module+"/"); ok || imp == module {
			out = append(out, r)
		} else if !std[imp] {
			out = append(out, "ext:"+imp)
		}
	}
	return out
}

// layer of a package: a package may import only packages of a lower
// layer (or, in the domain layer, the domain packages its rules allow).
// The folders of internal/ say the layer: infra/, app/ (consumers),
// testkit/, tests/ and tools/.
func layer(p string) int {
	switch {
	case strings.HasPrefix(p, "internal/infra/"):
		return 1 // infrastructure
	case slices.Contains([]string{"claims", "nodes", "leader", "recovery", "health", "systemd"}, p):
		return 2 // domain
	case p == "configs":
		return 3 // maps the file onto the domain's types
	case strings.HasPrefix(p, "internal/app/"):
		return 4 // consumers: the HTTP API, the demo engine, the demo
	case strings.HasPrefix(p, "cmd/"):
		return 5 // the binaries: wiring
	case p == "internal/testkit", strings.HasPrefix(p, "internal/testkit/"), strings.HasPrefix(p, "internal/tests/"),
		strings.HasPrefix(p, "internal/tools/"):
		return 0 // test kits, test-only packages and tools: checked apart
	}
	return -1 // a folder with no layer
}

// domainImports: which domain packages a domain package may import.
// The others import no domain package.
var domainImports = map[string][]string{
	"nodes":    {"leader"},
	"recovery": {"claims", "leader"},
	"health":   {"claims", "leader", "nodes", "recovery"},
}

// TestImportRules fails on an import that breaks the package map of
// ARCHITECTURE.md, on a dependency (direct or not) of claims or leader
// that their rules forbid, and on an import cycle.
func TestImportRules(t *testing.T) {
	g := list(t)
	if len(g) < 10 {
		t.Fatalf("go list found %d packages", len(g))
	}
	for p, n := range g {
		for _, e := range n.errs {
			t.Errorf("%s: %s", p, e)
		}
		for _, imp := range n.imports {
			if err := rule(p, imp); err != nil {
				t.Errorf("%s imports %s: %v", p, imp, err)
			}
		}
		for _, dep := range n.deps {
			if err := depRule(p, dep); err != nil {
				t.Errorf("%s depends on %s: %v", p, dep, err)
			}
		}
	}
	if c := cycle(g); c != nil {
		t.Errorf("import cycle: %s", strings.Join(c, " → "))
	}
}

// configDoc writes docs/configuration.md from the configuration's model:
// the one tool that imports configs.
const configDoc = "internal/tools/configdoc"

// rule says why p may not import imp (nil when it may).
func rule(p, imp string) error {
	ext, isExt := strings.CutPrefix(imp, "ext:")
	switch {
	case p == "claims" && isExt && ext != "github.com/lib/pq":
		return fmt.Errorf("claims, the library engines import, uses only the database driver")
	case p == "claims" && !isExt:
		return fmt.Errorf("claims, the library engines import, imports nothing of the daemon")
	case isExt && ext == "github.com/lmittmann/tint" && !strings.HasPrefix(p, "cmd/"):
		return fmt.Errorf("tint is the console's log handler, which cmd sets up: log an error as slog.Any(\"err\", err)")
	case isExt:
		return nil
	case imp == "configs" && !strings.HasPrefix(p, "cmd/") && p != configDoc:
		return fmt.Errorf("only cmd (and %s, which documents it) imports configs: packages take their own Config", configDoc)
	case p == "leader" && slices.Contains([]string{"nodes", "health", "recovery", "claims"}, imp):
		return fmt.Errorf("the election knows nothing of the registry, the check or repairs")
	case layer(p) == 2 && layer(imp) == 2 && !slices.Contains(domainImports[p], imp):
		return fmt.Errorf("%s may import only %v of the domain", p, domainImports[p])
	case layer(p) < 0 || layer(imp) < 0:
		return fmt.Errorf("a package outside the layers of ARCHITECTURE.md")
	case layer(p) == 0 || layer(imp) == 0:
		if layer(p) != 0 && p != "internal/app/demo" {
			return fmt.Errorf("test kits are for tests (and the demo)")
		}
		return nil
	case layer(imp) > layer(p):
		return fmt.Errorf("layer %d imports layer %d (1 infrastructure, 2 domain, 3 configs, 4 consumers, 5 binaries)", layer(p), layer(imp))
	case slices.Contains(leaves, p):
		return fmt.Errorf("%s is a leaf: it imports nothing of the module", p)
	case layer(imp) == layer(p) && layer(p) == 1 && slices.Contains(leaves, imp):
		return nil
	case layer(imp) == layer(p) && (layer(p) == 1 || layer(p) == 5):
		return fmt.Errorf("packages of layer %d do not import each other", layer(p))
	}
	return nil
}

// leaves: packages of layer 1 that import nothing of the module (not even
// another leaf: rule refuses it), which the other packages of layer 1 may
// import:
//   - safefile, the one safe reader of the files a configuration names;
//   - sqltext, statements as templates with named slots and parameters:
//     the one way of writing SQL (ARCHITECTURE.md), which audit and pgdb
//     use for the sidecar's own tables as the domain packages do. It
//     depends on the standard library and sqlx alone.
var leaves = []string{"internal/infra/safefile", "internal/infra/sqltext"}

// depRule says why p may not depend on dep, directly or through others.
func depRule(p, dep string) error {
	ext, isExt := strings.CutPrefix(dep, "ext:")
	switch {
	case p == "claims" && !isExt:
		return fmt.Errorf("claims, the library engines import, depends on nothing of the daemon")
	case p == "claims" && !strings.HasPrefix(ext, "github.com/lib/pq"):
		return fmt.Errorf("claims, the library engines import, depends only on the database driver")
	case p == "leader" && slices.Contains([]string{"nodes", "health", "recovery", "claims"}, dep):
		return fmt.Errorf("the election knows nothing of the registry, the check or repairs")
	case dep == "configs" && !strings.HasPrefix(p, "cmd/") && p != configDoc:
		return fmt.Errorf("only cmd (and %s) depends on configs", configDoc)
	case layer(p) == 2 && layer(dep) == 2 && !slices.Contains(domainDeps(p), dep):
		return fmt.Errorf("%s may depend only on %v of the domain, directly or not", p, domainDeps(p))
	case isExt && strings.HasPrefix(ext, "go.etcd.io/etcd/server") && (layer(p) >= 1 && layer(p) <= 3 || p == "cmd/enginehealth"):
		return fmt.Errorf("the daemon never links an etcd server (tests and the demo embed one)")
	}
	return nil
}

// domainDeps: the domain packages p may depend on, directly or not.
func domainDeps(p string) []string {
	var out []string
	for _, d := range domainImports[p] {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
		for _, dd := range domainDeps(d) {
			if !slices.Contains(out, dd) {
				out = append(out, dd)
			}
		}
	}
	return out
}

// cycle returns a cycle of imports among the module's packages, or nil.
func cycle(g graph) []string {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(p string) []string
	visit = func(p string) []string {
		state[p] = open
		stack = append(stack, p)
		for _, imp := range g[p].imports {
			if _, ours := g[imp]; !ours {
				continue
			}
			switch state[imp] {
			case open:
				i := slices.Index(stack, imp)
				return append(slices.Clone(stack[i:]), imp)
			case unseen:
				if c := visit(imp); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[p] = done
		return nil
	}
	for p := range g {
		if state[p] == unseen {
			if c := visit(p); c != nil {
				return c
			}
		}
	}
	return nil
}

// TestCycleFound: the cycle check finds one.
func TestCycleFound(t *testing.T) {
	g := graph{}
	for p, imps := range map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}} {
		n := g[p]
		n.imports = imps
		g[p] = n
	}
	if c := cycle(g); len(c) != 4 || c[0] != c[3] {
		t.Fatalf("cycle %v, want a three-package cycle", c)
	}
	delete(g, "c")
	if c := cycle(g); c != nil {
		t.Fatalf("cycle %v in a graph without one", c)
	}
}

func TestRuleCatchesViolations(t *testing.T) {
	for _, c := range [][2]string{
		{"claims", "configs"},
		{"claims", "internal/infra/pgdb"},
		{"claims", "ext:gopkg.in/yaml.v3"},
		{"recovery", "configs"},
		{"health", "configs"},
		{"internal/app/api", "configs"},
		{"leader", "nodes"},
		{"leader", "health"},
		{"internal/infra/pgdb", "nodes"},
		{"nodes", "internal/app/api"},
		{"recovery", "internal/testkit/pgtest"},
		{"internal/infra/audit", "internal/infra/pgdb"},
		{"internal/infra/sqltext", "internal/infra/pgdb"},
		{"internal/infra/sqltext", "internal/infra/safefile"},
		{"internal/infra/safefile", "internal/infra/sqltext"},
		{"internal/app/api", "cmd/enginehealth"},
		{"internal/misc", "claims"},
		{"internal/app/demoengine", "internal/testkit/pgtest"},
		{"nodes", "recovery"},
		{"recovery", "health"},
		{"systemd", "nodes"},
		{"health", "ext:github.com/lmittmann/tint"},
		{"internal/app/api", "ext:github.com/lmittmann/tint"},
	} {
		if rule(c[0], c[1]) == nil {
			t.Errorf("%s → %s is allowed", c[0], c[1])
		}
	}
	for _, c := range [][2]string{
		{"claims", "ext:github.com/lib/pq"},
		{"recovery", "claims"},
		{"health", "recovery"},
		{"cmd/enginehealth", "configs"},
		{"configs", "health"},
		{"internal/app/api", "health"},
		{"internal/app/demo", "internal/testkit/pgtest"},
		{"internal/infra/audit", "internal/infra/sqltext"},
		{"internal/infra/pgdb", "internal/infra/safefile"},
		{"internal/infra/sqltext", "ext:github.com/jmoiron/sqlx"},
		{"cmd/enginehealth", "ext:github.com/lmittmann/tint"},
	} {
		if err := rule(c[0], c[1]); err != nil {
			t.Errorf("%s → %s refused: %v", c[0], c[1], err)
		}
	}
}

// TestDepRule: dependencies through other packages (or modules) count.
func TestDepRule(t *testing.T) {
	for _, c := range [][2]string{
		{"recovery", "nodes"},
		{"leader", "nodes"},
		{"claims", "internal/infra/pgdb"},
		{"claims", "ext:example.com/shim"},
		{"nodes", "recovery"},
		{"leader", "ext:go.etcd.io/etcd/server/v3/embed"},
		{"cmd/enginehealth", "ext:go.etcd.io/etcd/server/v3/embed"},
	} {
		if depRule(c[0], c[1]) == nil {
			t.Errorf("%s depending on %s is allowed", c[0], c[1])
		}
	}
	for _, c := range [][2]string{
		{"health", "claims"},
		{"health", "leader"},
		{"claims", "ext:github.com/lib/pq/oid"},
		{"internal/app/demo", "ext:go.etcd.io/etcd/server/v3/embed"},
	} {
		if err := depRule(c[0], c[1]); err != nil {
			t.Errorf("%s depending on %s refused: %v", c[0], c[1], err)
		}
	}
}
