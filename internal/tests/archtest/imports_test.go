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
}

// list returns every package of the module with its non-test imports.
func list(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		var own []string
		for _, imp := range p.Imports {
			if r, ok := strings.CutPrefix(imp, module+"/"); ok {
				own = append(own, r)
			} else if !isStd(imp) {
				own = append(own, "ext:"+imp)
			}
		}
		pkgs[rel] = own
	}
	return pkgs
}

// isStd reports whether imp is in the standard library (no dot in its
// first element).
func isStd(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
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

// TestImportRules fails on an import that breaks the package map of
// ARCHITECTURE.md.
func TestImportRules(t *testing.T) {
	pkgs := list(t)
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	for p, imps := range pkgs {
		for _, imp := range imps {
			if err := rule(p, imp); err != nil {
				t.Errorf("%s imports %s: %v", p, imp, err)
			}
		}
	}
}

// rule says why p may not import imp (nil when it may).
func rule(p, imp string) error {
	ext, isExt := strings.CutPrefix(imp, "ext:")
	switch {
	case p == "claims" && isExt && ext != "github.com/lib/pq":
		return fmt.Errorf("claims, the library engines import, uses only the database driver")
	case p == "claims" && !isExt:
		return fmt.Errorf("claims, the library engines import, imports nothing of the daemon")
	case isExt:
		return nil
	case imp == "configs" && !strings.HasPrefix(p, "cmd/"):
		return fmt.Errorf("only cmd imports configs: packages take their own Config")
	case p == "leader" && slices.Contains([]string{"nodes", "health", "recovery", "claims"}, imp):
		return fmt.Errorf("the election knows nothing of the registry, the check or repairs")
	case layer(p) < 0 || layer(imp) < 0:
		return fmt.Errorf("a package outside the layers of ARCHITECTURE.md")
	case layer(p) == 0 || layer(imp) == 0:
		if layer(p) != 0 && !strings.HasPrefix(p, "internal/app/demo") {
			return fmt.Errorf("test kits are for tests (and the demo)")
		}
		return nil
	case layer(imp) > layer(p):
		return fmt.Errorf("layer %d imports layer %d (1 infrastructure, 2 domain, 3 configs, 4 consumers, 5 binaries)", layer(p), layer(imp))
	case layer(imp) == layer(p) && (layer(p) == 1 || layer(p) == 5):
		return fmt.Errorf("packages of layer %d do not import each other", layer(p))
	}
	return nil
}

// TestRuleCatchesViolations: the rules are not vacuous.
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
		{"internal/app/api", "cmd/enginehealth"},
		{"internal/misc", "claims"},
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
	} {
		if err := rule(c[0], c[1]); err != nil {
			t.Errorf("%s → %s refused: %v", c[0], c[1], err)
		}
	}
}
