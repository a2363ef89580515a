package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// manDir holds the generated man pages the packages install.
const manDir = "../../docs/man"

// TestManPagesFresh: docs/man holds exactly the man pages the commands
// generate now (go test ./cmd/enginehealth -run TestManPagesFresh
// -update writes them), one per command, each naming its command.
func TestManPagesFresh(t *testing.T) {
	dir := t.TempDir()
	if err := writeManPages(dir); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.RemoveAll(manDir); err != nil {
			t.Fatal(err)
		}
		if err := writeManPages(manDir); err != nil {
			t.Fatal(err)
		}
	}
	names := func(d string) []string {
		t.Helper()
		es, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	want, have := names(dir), names(manDir)
	if !slices.Equal(want, have) {
		t.Fatalf("docs/man holds %v, the commands make %v (run with -update)", have, want)
	}
	for _, n := range want {
		w, _ := os.ReadFile(filepath.Join(dir, n))
		h, _ := os.ReadFile(filepath.Join(manDir, n))
		if !bytes.Equal(w, h) {
			t.Errorf("docs/man/%s is stale (run with -update)", n)
		}
	}
	for _, n := range []string{"enginehealth.1", "enginehealth-status.1", "enginehealth-holds-retry.1", "enginehealth-version.1"} {
		b, err := os.ReadFile(filepath.Join(manDir, n))
		if err != nil {
			t.Fatalf("no %s: %v", n, err)
		}
		cmd := strings.ReplaceAll(strings.TrimSuffix(n, ".1"), "-", " ")
		if !strings.Contains(string(b), ".TH \"ENGINEHEALTH\" \"1\" \"Nov 2026\"") || !strings.Contains(string(b), strings.ReplaceAll(cmd, " ", `\-`)) &&
			!strings.Contains(string(b), cmd) {
			t.Errorf("%s does not look like the man page of %q:\n%s", n, cmd, b)
		}
	}
}
