package main

import (
	"os"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	out := `goos: linux
BenchmarkFailover/kill-2         	       1	3234956905 ns/op	      3234 failover-ms	      3000 ttl-ms
BenchmarkRepair/batch=1000-2         	       1	1068396630 ns/op	    244361 bare-rows/s	         0.3830 ratio-vs-bare-update	     93599 rows/s
PASS`
	res, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if res["BenchmarkFailover/kill"]["failover-ms"] != 3234 || res["BenchmarkFailover/kill"]["ttl-ms"] != 3000 {
		t.Fatalf("failover: %v", res)
	}
	if res["BenchmarkRepair/batch=1000"]["ratio-vs-bare-update"] != 0.383 {
		t.Fatalf("repair: %v", res)
	}
}

func TestRewriteDoc(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/benchmarks.md"
	if err := os.WriteFile(p, []byte("# x\n<!-- bench:start -->\nold\n<!-- bench:end -->\ntail\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := results{"BenchmarkFailover/graceful": {"failover-ms": 72, "ttl-ms": 3000}}
	if err := rewrite(p, res); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	s := string(b)
	if strings.Contains(s, "\nold\n") || !strings.Contains(s, "| failover after SIGTERM of the master | 72 failover-ms | ≤ 1000 ms — met |") ||
		!strings.Contains(s, "(not run)") || !strings.HasSuffix(s, "<!-- bench:end -->\ntail\n") {
		t.Fatalf("rewritten:\n%s", s)
	}
}

// TestBenchmarksDocHasMarkers: the page make bench rewrites
// (docs/benchmarks.md, named in the Makefile) has the block to rewrite,
// so that a 9-minute make bench does not fail at its last step.
func TestBenchmarksDocHasMarkers(t *testing.T) {
	mk, err := os.ReadFile("../../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "./internal/tools/benchreport -doc docs/benchmarks.md bench.out") {
		t.Fatal("the Makefile's bench target does not write docs/benchmarks.md")
	}
	b, err := os.ReadFile("../../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, startMark), strings.Index(s, endMark)
	if i < 0 || j < i || strings.Count(s, startMark) != 1 || strings.Count(s, endMark) != 1 {
		t.Fatalf("docs/benchmarks.md: want one %s ... %s block", startMark, endMark)
	}
	if !strings.Contains(s[i:j], "| figure | measured | target |") {
		t.Errorf("docs/benchmarks.md: the block holds no table")
	}
}
