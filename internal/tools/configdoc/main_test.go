package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/configs"
)

var pagePath = filepath.Join("..", "..", "..", "docs", "configuration.md")

// TestPageIsCurrent: docs/configuration.md holds the reference the code
// writes today.
func TestPageIsCurrent(t *testing.T) {
	page, err := os.ReadFile(pagePath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Page(page)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(page, want) {
		t.Fatalf("docs/configuration.md is stale: run go generate ./configs (and commit the page)")
	}
}

// TestEveryKeyIsInThePage: every key of the model has its row in the
// generated part of the page, with what a change of it needs.
func TestEveryKeyIsInThePage(t *testing.T) {
	page, err := os.ReadFile(pagePath)
	if err != nil {
		t.Fatal(err)
	}
	_, gen, _ := strings.Cut(string(page), Begin)
	gen, _, _ = strings.Cut(gen, End)
	keys, err := configs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.Contains(gen, "\n| `"+k.Path+"` | ") {
			t.Errorf("%s: no row in docs/configuration.md", k.Path)
			continue
		}
		_, row, _ := strings.Cut(gen, "\n| `"+k.Path+"` | ")
		row, _, _ = strings.Cut(row, "\n")
		want := "| restart |"
		if configs.Reloadable(k.Path) {
			want = "| reload |"
		}
		if !strings.Contains(row, want) {
			t.Errorf("%s: the row does not say %q: %s", k.Path, want, row)
		}
	}
}

// TestPageNeedsMarkers: a page without its markers is an error, not a
// page rewritten whole.
func TestPageNeedsMarkers(t *testing.T) {
	for _, page := range []string{"# Configuration\n", "# Configuration\n" + Begin + "\n"} {
		if _, err := Page([]byte(page)); err == nil {
			t.Errorf("Page(%q): no error", page)
		}
	}
	out, err := Page([]byte("head\n" + Begin + "\nSTALE-ROWS\n" + End + "\ntail\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(out); !strings.HasPrefix(s, "head\n"+Begin+"\n") || !strings.HasSuffix(s, End+"\ntail\n") || strings.Contains(s, "STALE-ROWS") {
		t.Fatalf("Page kept the wrong parts:\n%s", s)
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", time.Millisecond: "1ms", 5 * time.Second: "5s", 10 * time.Minute: "10m", time.Hour: "1h",
		90 * time.Minute: "1h30m", 24 * time.Hour: "24h", 30 * 24 * time.Hour: "720h (30 days)",
	} {
		if got := duration(d); got != want {
			t.Errorf("duration(%v) = %q, want %q", d, got, want)
		}
	}
}
