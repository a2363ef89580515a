package main

import (
	"bytes"
	"io"
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
	fresh(t, manDir, writeManPages)
	for _, n := range []string{"enginehealth.1", "enginehealth-status.1", "enginehealth-holds-retry.1", "enginehealth-version.1"} {
		b, err := os.ReadFile(filepath.Join(manDir, n))
		if err != nil {
			t.Fatalf("no %s: %v", n, err)
		}
		cmd := strings.ReplaceAll(strings.TrimSuffix(n, ".1"), "-", " ")
		title := strings.ToUpper(strings.TrimSuffix(n, ".1"))
		if !strings.Contains(string(b), ".TH \""+title+"\" \"1\" \"Nov 2026\"") || !strings.Contains(string(b), strings.ReplaceAll(cmd, " ", `\-`)) &&
			!strings.Contains(string(b), cmd) {
			t.Errorf("%s does not look like the man page of %q:\n%s", n, cmd, b)
		}
	}
}

// TestCLIPagesFresh: docs/cli holds exactly the Markdown pages of the
// commands as they are now (-update writes them), and the root's links
// every command.
func TestCLIPagesFresh(t *testing.T) {
	fresh(t, cliDir, writeMarkdown)
	b, err := os.ReadFile(filepath.Join(cliDir, "enginehealth.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range newRoot(io.Discard, io.Discard).Commands() {
		if !c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() {
			continue // cobra's help: no page
		}
		if !strings.Contains(string(b), "(enginehealth_"+c.Name()+".md)") {
			t.Errorf("docs/cli/enginehealth.md does not link %s", c.Name())
		}
	}
}

// cliDir holds the generated Markdown pages of the commands.
const cliDir = "../../docs/cli"

// fresh fails when dir does not hold exactly what write makes now (with
// -update, it writes them there).
func fresh(t *testing.T, dir string, write func(string) error) {
	t.Helper()
	tmp := t.TempDir()
	if err := write(tmp); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := write(dir); err != nil {
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
	want, have := names(tmp), names(dir)
	if !slices.Equal(want, have) {
		t.Fatalf("%s holds %v, the commands make %v (run with -update)", dir, have, want)
	}
	for _, n := range want {
		w, _ := os.ReadFile(filepath.Join(tmp, n))
		h, _ := os.ReadFile(filepath.Join(dir, n))
		if !bytes.Equal(w, h) {
			t.Errorf("%s/%s is stale (run with -update)", dir, n)
		}
	}
}
