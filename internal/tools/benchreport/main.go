// Command benchreport reads `go test -bench` output and prints the domain
// figures beside their design targets. With -doc FILE it also rewrites the
// table between the markers
//
//	<!-- bench:start --> and <!-- bench:end -->
//
// of that Markdown file (docs/benchmarks.md for make bench), with the date
// and the machine. It exits 1 when a figure named here is missing from the
// output (a benchmark did not run).
//
//	go test -run '^$' -bench . ./... | tee bench.out
//	go run ./internal/tools/benchreport -doc docs/benchmarks.md bench.out
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// results maps "BenchmarkName/sub" (without the -N suffix) to its metrics.
type results map[string]map[string]float64

var procSuffix = regexp.MustCompile(`-\d+$`)

func parse(r io.Reader) (results, error) {
	res := results{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		m := res[name]
		if m == nil {
			m = map[string]float64{}
			res[name] = m
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			m[f[i+1]] = v
		}
	}
	return res, sc.Err()
}

// row is one line of the report.
type row struct {
	figure, bench, metric string
	// target describes the target; ok judges the value (nil: no target).
	target func(m map[string]float64) string
	ok     func(v float64, m map[string]float64) bool
}

func atMost(limit float64) func(float64, map[string]float64) bool {
	return func(v float64, _ map[string]float64) bool { return v <= limit }
}

func atLeast(limit float64) func(float64, map[string]float64) bool {
	return func(v float64, _ map[string]float64) bool { return v >= limit }
}

func fixed(s string) func(map[string]float64) string {
	return func(map[string]float64) string { return s }
}

var rows = []row{
	{"failover after SIGKILL of the master", "BenchmarkFailover/kill", "failover-ms",
		func(m map[string]float64) string { return fmt.Sprintf("≤ TTL + 1000 = %.0f ms", m["ttl-ms"]+1000) },
		func(v float64, m map[string]float64) bool { return v <= m["ttl-ms"]+1000 }},
	{"failover after SIGTERM of the master", "BenchmarkFailover/graceful", "failover-ms", fixed("≤ 1000 ms"), atMost(1000)},
	{"acting master after SIGKILL of the master (waits out its trust window)", "BenchmarkFailover/kill", "acting-ms",
		func(m map[string]float64) string {
			return fmt.Sprintf("≤ TTL + trust window + 1000 = %.0f ms", 2*m["ttl-ms"])
		},
		func(v float64, m map[string]float64) bool { return v <= 2*m["ttl-ms"] }},
	{"acting master after SIGTERM of the master (it resigned: no wait)", "BenchmarkFailover/graceful", "acting-ms", fixed("≤ 1000 ms"), atMost(1000)},
	{"failover after SIGKILL of the master and release-lease (the unit's ExecStopPost=)", "BenchmarkFailover/crash-released", "failover-ms", fixed("≤ 1000 ms"), atMost(1000)},
	{"acting master after SIGKILL of the master and release-lease (waits out its trust window)", "BenchmarkFailover/crash-released", "acting-ms",
		func(m map[string]float64) string {
			return fmt.Sprintf("≤ trust window + 1000 = %.0f ms", m["ttl-ms"])
		},
		func(v float64, m map[string]float64) bool { return v <= m["ttl-ms"] }},
	{"failover after SIGKILL of the master, TLS everywhere", "BenchmarkTLSFailover", "tls-failover-ms",
		func(m map[string]float64) string { return fmt.Sprintf("≤ TTL + 1000 = %.0f ms", m["ttl-ms"]+1000) },
		func(v float64, m map[string]float64) bool { return v <= m["ttl-ms"]+1000 }},
	{"acting master after SIGKILL of the master, TLS everywhere", "BenchmarkTLSFailover", "tls-acting-ms",
		func(m map[string]float64) string {
			return fmt.Sprintf("≤ TTL + trust window + 1000 = %.0f ms", 2*m["ttl-ms"])
		},
		func(v float64, m map[string]float64) bool { return v <= 2*m["ttl-ms"] }},
	{"no acting master, one etcd member frozen, TTL 3 s (worst role)", "BenchmarkFrozenMember/ttl=3s", "frozen-member-failover-ms",
		func(m map[string]float64) string {
			return fmt.Sprintf("≤ TTL + trust window + 2000 = %.0f ms", 2*m["ttl-ms"]+1000)
		},
		func(v float64, m map[string]float64) bool { return v <= 2*m["ttl-ms"]+1000 }},
	{"no acting master, one etcd member frozen, TTL 10 s (worst role)", "BenchmarkFrozenMember/ttl=10s", "frozen-member-failover-ms",
		func(m map[string]float64) string { return fmt.Sprintf("≤ TTL + 2000 = %.0f ms", m["ttl-ms"]+2000) },
		func(v float64, m map[string]float64) bool { return v <= m["ttl-ms"]+2000 }},
	{"master changes over 4 member freezes, TTL 10 s", "BenchmarkFrozenMember/ttl=10s", "master-changes", fixed("0"), atMost(0)},
	{"master's office suspended while one etcd follower is frozen, TTL 3 s (worst of 3)", "BenchmarkFrozenMember/ttl=3s", "frozen-follower-suspended-ms", fixed("— (the price of a 2 s trust window)"), nil},
	{"master's office suspended while one etcd follower is frozen, TTL 10 s (worst of 3)", "BenchmarkFrozenMember/ttl=10s", "frozen-follower-suspended-ms", fixed("0"), atMost(0)},
	{"crash to repair", "BenchmarkCrashToRepair", "crash-to-repair-ms",
		func(m map[string]float64) string {
			return fmt.Sprintf("≤ claim_timeout + interval + 1 s = %.0f ms", m["limit-ms"])
		},
		func(v float64, m map[string]float64) bool { return v <= m["limit-ms"] }},
	{"grading a dead engine's expired claims: one pass's batch of 1,000 interruptions of one node, less an idle pass (ms)", "BenchmarkGradeExpiry", "grade-ms-per-1000-interruptions", fixed("—"), nil},
	{"grading a poison wave: 1,000 instances of a node with 5,000 interruptions in the window interrupted on a second node, one pass, less an idle pass (ms)", "BenchmarkGradeExpiry", "grade-ms-poison-wave-1000", fixed("—"), nil},
	{"repair throughput, atomic task's default policy (default batch 10000)", "BenchmarkRepair/batch=10000", "rows/s", fixed("—"), nil},
	{"repair throughput, strategy none", "BenchmarkRepair/batch=10000", "rows/s-strategy-none", fixed("—"), nil},
	{"repair throughput, a policy that parks every instance", "BenchmarkRepair/batch=10000", "rows/s-policy-parks", fixed("—"), nil},
	{"one batch of 10,000 after the first, default policy: the pick (the attempts probe, and the batch's retries at once read from the events) (EXPLAIN ANALYZE, ms)", "BenchmarkRepair/batch=10000", "default-batch-pick-ms", fixed("—"), nil},
	{"one batch of 10,000, default policy: the decision (EXPLAIN ANALYZE, ms)", "BenchmarkRepair/batch=10000", "default-batch-decision-ms", fixed("—"), nil},
	{"one batch of 10,000, default policy: the instances' update (EXPLAIN ANALYZE, ms)", "BenchmarkRepair/batch=10000", "default-batch-update-ms", fixed("—"), nil},
	{"one batch of 10,000, default policy: the writes (events, run count) (EXPLAIN ANALYZE, ms)", "BenchmarkRepair/batch=10000", "default-batch-writes-ms", fixed("—"), nil},
	{"one batch of 10,000, strategy none: the pick (attempts probe included) (EXPLAIN ANALYZE, ms)", "BenchmarkRepair/batch=10000", "none-batch-pick-ms", fixed("—"), nil},
	{"one batch of 10,000, strategy none: the decision (EXPLAIN ANALYZE, ms)", "BenchmarkRepair/batch=10000", "none-batch-decision-ms", fixed("—"), nil},
	{"one batch of 10,000, strategy none: the instances' update (EXPLAIN ANALYZE, ms)", "BenchmarkRepair/batch=10000", "none-batch-update-ms", fixed("—"), nil},
	{"one batch of 10,000, strategy none: the writes (attempts rows, events, run count) (EXPLAIN ANALYZE, ms)", "BenchmarkRepair/batch=10000", "none-batch-writes-ms", fixed("—"), nil},
	{"one batch of 10,000, parking policy: the pick (attempts probe included) (EXPLAIN ANALYZE, ms)", "BenchmarkRepair/batch=10000", "parks-batch-pick-ms", fixed("—"), nil},
	{"one batch of 10,000, parking policy: the decision (EXPLAIN ANALYZE, ms)", "BenchmarkRepair/batch=10000", "parks-batch-decision-ms", fixed("—"), nil},
	{"one batch of 10,000, parking policy: the instances' update (EXPLAIN ANALYZE, ms)", "BenchmarkRepair/batch=10000", "parks-batch-update-ms", fixed("—"), nil},
	{"one batch of 10,000, parking policy: the writes (attempts rows, events, run count) (EXPLAIN ANALYZE, ms)", "BenchmarkRepair/batch=10000", "parks-batch-writes-ms", fixed("—"), nil},
	{"repair, atomic task's default policy (retry at once), of its floor: one event per row, timed batch by batch beside it (a twin table's floor batch before each repair batch; default batch 10000)", "BenchmarkRepair/batch=10000", "default-of-floor-event-only-interleaved", fixed("≥ 0.8"), atLeast(0.8)},
	{"repair, strategy none, of its floor: one event per row (the instance failed), timed batch by batch beside it", "BenchmarkRepair/batch=10000", "none-of-floor-event-only-interleaved", fixed("≥ 0.8"), atLeast(0.8)},
	{"repair, a policy that parks every instance (fixed 1 h), of its floor: each row re-checked and locked where it is (not moved), one waiting attempts row and one event per row, timed batch by batch beside it", "BenchmarkRepair/batch=10000", "parks-of-floor-attempts-row-and-event-interleaved", fixed("≥ 0.8"), atLeast(0.8)},
	{"the same, parking policy, of a parking floor whose pick also reads each instance's attempts row and leaves a parked one alone (as the repair's pick must; without it a second pass parks them again, or fails on the primary key), timed batch by batch beside it", "BenchmarkRepair/batch=10000", "parks-of-floor-parked-probe-attempts-row-and-event-interleaved", fixed("—"), nil},
	{"repair of a second interruption of every instance (its first retry at once still open in the events), default policy, of its floor: one event per row, each instance's retries read from its latest event, timed before and after", "BenchmarkRepair/batch=10000", "default-second-of-floor-event-and-history-probe", fixed("—"), nil},
	{"the same, default policy, against whole floors timed before and after each whole repair (noisier: seconds apart)", "BenchmarkRepair/batch=10000", "default-of-floor-event-only", fixed("—"), nil},
	{"the same, strategy none, against whole floors", "BenchmarkRepair/batch=10000", "none-of-floor-event-only", fixed("—"), nil},
	{"the same, parking policy, against whole floors", "BenchmarkRepair/batch=10000", "parks-of-floor-attempts-row-and-event", fixed("—"), nil},
	{"repair, default policy, of its floor: the fastest of each in the run", "BenchmarkRepair/batch=10000", "default-of-floor-event-only-fastest", fixed("—"), nil},
	{"repair, strategy none, of its floor: the fastest of each in the run", "BenchmarkRepair/batch=10000", "none-of-floor-event-only-fastest", fixed("—"), nil},
	{"repair, parking policy, of its floor: the fastest of each in the run", "BenchmarkRepair/batch=10000", "parks-of-floor-attempts-row-and-event-fastest", fixed("—"), nil},
	{"repair vs one bare UPDATE, atomic task's default policy (default batch 10000)", "BenchmarkRepair/batch=10000", "ratio-vs-bare-update", fixed("— (the ≥ 0.38 target is withdrawn: the floors above)"), nil},
	{"repair vs one bare UPDATE (batch 1000, for comparison)", "BenchmarkRepair/batch=1000", "ratio-vs-bare-update", fixed("—"), nil},
	{"repair vs one bare UPDATE, without events (default batch)", "BenchmarkRepair/batch=10000", "ratio-without-events", fixed("—"), nil},
	{"repair vs one bare UPDATE, strategy none: no attempts rows (default batch)", "BenchmarkRepair/batch=10000", "ratio-strategy-none", fixed("—"), nil},
	{"repair vs one bare UPDATE, a policy that parks every instance (default batch)", "BenchmarkRepair/batch=10000", "ratio-policy-parks", fixed("—"), nil},
	{"floor of the data model: the repair's pick, re-check and fenced batches, UPDATE alone, hand-written (default batch)", "BenchmarkRepair/batch=10000", "floor-batched-update-only", fixed("—"), nil},
	{"floor of the data model: batched UPDATE + one event per row, hand-written", "BenchmarkRepair/batch=10000", "floor-event-only", fixed("—"), nil},
	{"floor of the data model: batched UPDATE + one attempts row per row, hand-written", "BenchmarkRepair/batch=10000", "floor-attempts-row-only", fixed("—"), nil},
	{"floor of a parking repair: the pick, each row re-checked and locked where it is (not moved) + one waiting attempts row + one event per row, hand-written", "BenchmarkRepair/batch=10000", "floor-attempts-row-and-event", fixed("—"), nil},
	{"floor: one event per row, each instance's retries read from its latest event (a history of one event each)", "BenchmarkRepair/batch=10000", "floor-event-and-history-probe", fixed("—"), nil},
	{"floor: one event per row, each instance's history probed in the events with nothing to find (a first interruption)", "BenchmarkRepair/batch=10000", "floor-event-and-history-probe-first", fixed("—"), nil},
	{"floor: one event per row, each instance's attempts row probed (none there)", "BenchmarkRepair/batch=10000", "floor-event-and-parked-probe", fixed("—"), nil},
	{"floor: one event per row, both probes of a first interruption (what the default policy reads)", "BenchmarkRepair/batch=10000", "floor-event-and-both-probes-first", fixed("—"), nil},
	{"events table: heap bytes per event", "BenchmarkRepair/batch=10000", "events-heap-B/event", fixed("—"), nil},
	{"events table: primary key bytes per event", "BenchmarkRepair/batch=10000", "events-pkey-B/event", fixed("—"), nil},
	{"idle check pass, 10k rows", "BenchmarkCheckIdle", "idle-10k-ms", fixed("—"), nil},
	{"idle check pass, 1M rows", "BenchmarkCheckIdle", "idle-1M-ms", fixed("—"), nil},
	{"idle check, 1M / 10k rows", "BenchmarkCheckIdle", "idle-ratio", fixed("≤ 1.5"), atMost(1.5)},
	{"check pass, 1M rows, 100k retries waiting (none due) / idle pass", "BenchmarkCheckParked", "ratio-100k-waiting", fixed("≤ 1.5"), atMost(1.5)},
	{"check pass, 1M old failures under on_failure / idle pass", "BenchmarkCheckParked", "ratio-1M-old-failures", fixed("≤ 1.5"), atMost(1.5)},
	{"sweep of every interrupted instance, 100k waiting (first pass of an office)", "BenchmarkCheckParked", "sweep-100k-waiting-ms", fixed("—"), nil},
	{"settle pass, 100k retries at once still running (every case open: read, none closed; each check pass)", "BenchmarkSettleOpenCases", "settle-100k-open-ms", fixed("—"), nil},
	{"settle pass, the same 100k once succeeded (an attempts row and an event each)", "BenchmarkSettleOpenCases", "settle-100k-closed-ms", fixed("—"), nil},
	{"settle pass, 100k instances interrupted three times, every case open (a row from each case's second retry: each case read once)", "BenchmarkSettleOpenCases", "settle-100k-open-third-ms", fixed("—"), nil},
	{"retry statistics (retries stats), the same 100k open cases", "BenchmarkSettleOpenCases", "retry-stats-100k-open-third-ms", fixed("—"), nil},
	{"settle pass, 100k cases of which the first still runs and the 99,999 after it closed, by the master that closed them (reads the open case again, and the events since)", "BenchmarkSettleOpenCases", "settle-100k-behind-one-open-ms", fixed("—"), nil},
	{"the same pass by another master (reads every event after the cursor once; before this release, every pass did)", "BenchmarkSettleOpenCases", "settle-100k-behind-one-open-new-master-ms", fixed("—"), nil},
	{"console: the last day's page, 1,000 nodes, 100k events about instances, median answer", "BenchmarkConsoleDay", "day-page-ms", fixed("≤ 300 ms"), atMost(300)},
	{"console: the last day's page, 1,000 nodes, p90", "BenchmarkConsoleDay", "day-page-p90-ms", fixed("—"), nil},
	{"instance view (events --instance) at 10M events, p99", "BenchmarkInstanceHistory", "instance-history-p99-ms", fixed("< 50 ms"), func(v float64, _ map[string]float64) bool { return v < 50 }},
	{"scale: PostgreSQL commits/s, 10 heartbeating nodes (every 5 s)", "BenchmarkScale", "commits-per-s-10", fixed("—"), nil},
	{"scale: PostgreSQL commits/s, 1,000 heartbeating nodes", "BenchmarkScale", "commits-per-s-1000", fixed("—"), nil},
	{"scale: heartbeat p99, 10 nodes", "BenchmarkScale", "heartbeat-p99-ms-10", fixed("—"), nil},
	{"scale: heartbeat p99, 1,000 nodes", "BenchmarkScale", "heartbeat-p99-ms-1000", fixed("—"), nil},
	{"scale: check pass beside 10M rows, 10 nodes", "BenchmarkScale", "pass-ms-10", fixed("—"), nil},
	{"scale: check pass beside 10M rows, 1,000 nodes", "BenchmarkScale", "pass-ms-1000", fixed("—"), nil},
	{"scale: check pass, 1,000 / 10 nodes", "BenchmarkScale", "pass-ratio", fixed("≤ 2"), atMost(2)},
	{"scale: GET /v1/nodes p99, 10 nodes", "BenchmarkScale", "nodes-api-p99-ms-10", fixed("—"), nil},
	{"scale: GET /v1/nodes p99, 1,000 nodes", "BenchmarkScale", "nodes-api-p99-ms-1000", fixed("—"), nil},
	{"scale: pass marking 1 dead node of 10", "BenchmarkScale", "mark-1-of-10-ms", fixed("—"), nil},
	{"scale: pass marking 10 dead nodes of 1,000 (slowest)", "BenchmarkScale", "mark-10-of-1000-ms", fixed("—"), nil},
	{"API request over TLS, client certificate, reused connection (GET /healthz, 2 clients), p99", "BenchmarkAPIOverTLS", "tls-p99-us", fixed("—"), nil},
	{"API request over plain HTTP at the same load, p99", "BenchmarkAPIOverTLS", "plain-p99-us", fixed("—"), nil},
	{"API request p99, TLS / plain HTTP", "BenchmarkAPIOverTLS", "tls-ratio-vs-plain", fixed("≤ 2"), atMost(2)},
	{"idle RSS, master", "BenchmarkIdleFootprint", "rss-master-MB", fixed("< 40 MB"), atMost(40)},
	{"idle RSS, standby", "BenchmarkIdleFootprint", "rss-standby-MB", fixed("< 40 MB"), atMost(40)},
	{"idle CPU per 60 s, master", "BenchmarkIdleFootprint", "cpu-s-per-60s-master", fixed("no busy loop (≪ 60 s)"), atMost(3)},
	{"idle CPU per 60 s, standby", "BenchmarkIdleFootprint", "cpu-s-per-60s-standby", fixed("no busy loop (≪ 60 s)"), atMost(3)},
}

func main() {
	doc := flag.String("doc", "", "Markdown file whose bench:start/bench:end block is rewritten (make bench: docs/benchmarks.md)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: benchreport [-doc docs/benchmarks.md] [bench.out]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := report(flag.Arg(0), *doc); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

// report reads the benchmarks' output from path (standard input for ""),
// prints the figures beside their targets and, with doc, rewrites its
// table. A figure missing from the output is an error, after the rest.
func report(path, doc string) error {
	in := io.Reader(os.Stdin)
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }() // read only: nothing to act on
		in = f
	}
	res, err := parse(in)
	if err != nil {
		return err
	}
	missing := 0
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tMEASURED\tTARGET\t\tBENCHMARK")
	for _, r := range rows {
		m, ok := res[r.bench]
		v, has := m[r.metric]
		if !ok || !has {
			missing++
			fmt.Fprintf(tw, "%s\t(missing)\t%s\t\t%s %s\n", r.figure, r.target(m), r.bench, r.metric)
			continue
		}
		verdict := ""
		if r.ok != nil {
			verdict = "met"
			if !r.ok(v, m) {
				verdict = "NOT MET"
			}
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%s\n", r.figure, strconv.FormatFloat(v, 'f', -1, 64), r.metric, r.target(m), verdict, r.bench)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if doc != "" {
		if err := rewrite(doc, res); err != nil {
			return err
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d figures missing: a benchmark did not run", missing)
	}
	return nil
}

const (
	startMark = "<!-- bench:start -->"
	endMark   = "<!-- bench:end -->"
)

// markdown renders the figures as a table with the date and the machine.
func markdown(res results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %s (written by `make bench`):\n\n", time.Now().UTC().Format("2006-01-02"), machine())
	b.WriteString("| figure | measured | target |\n|---|---|---|\n")
	for _, r := range rows {
		m := res[r.bench]
		v, ok := m[r.metric]
		val := "(not run)"
		verdict := ""
		if ok {
			val = strconv.FormatFloat(v, 'f', -1, 64) + " " + r.metric
			if r.ok != nil {
				verdict = " — met"
				if !r.ok(v, m) {
					verdict = " — **not met**"
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s%s |\n", r.figure, val, r.target(m), verdict)
	}
	return b.String()
}

// machine describes this machine: CPU model, cores, memory.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
				mem = fmt.Sprintf(", %.0f GiB", kb/(1<<20))
			}
		}
	}
	return fmt.Sprintf("%s, %d cores%s, %s", model, runtime.NumCPU(), mem, runtime.Version())
}

func rewrite(path string, res results) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(b, []byte(startMark)), bytes.Index(b, []byte(endMark))
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %s ... %s block", path, startMark, endMark)
	}
	out := append([]byte{}, b[:i+len(startMark)]...)
	out = append(out, "\n"+markdown(res)...)
	out = append(out, b[j:]...)
	return os.WriteFile(path, out, 0o644)
}
