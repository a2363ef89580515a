package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/nodes"
)

// idleWindow is how long the footprint benchmark lets the daemons idle.
const idleWindow = 60 * time.Second

// procUsage reads a process's resident set (bytes) and CPU time.
func procUsage(pid int) (rss int64, cpu time.Duration, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb * 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name (which may hold spaces): utime and
	// stime are the 14th and 15th fields, in clock ticks (100 Hz on Linux).
	rest := string(stat)[strings.LastIndexByte(string(stat), ')')+2:]
	f := strings.Fields(rest)
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return rss, time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// BenchmarkIdleFootprint runs two daemons with nothing to repair for 60 s
// (one master, one not) and reports their RSS and CPU time over the window.
// Target (docs/benchmarks.md): under 40 MB RSS, no busy loops.
func BenchmarkIdleFootprint(b *testing.B) {
	for range b.N {
		c := newCluster(b)
		// Production-like timings: heartbeat 5s, check every 15s.
		cfg := func(name string) string {
			s := c.config(name, "")
			s = replaceOnce(b, s, "heartbeat_interval: 200ms", "heartbeat_interval: 5s")
			s = replaceOnce(b, s, "not_responding_after: 1s", "not_responding_after: 30s\n  schedule: \"@every 15s\"")
			s = replaceOnce(b, s, "level: debug", "level: info")
			return s
		}
		ds := map[string]*daemon{"node-a": c.start("node-a", cfg("node-a")), "node-b": c.start("node-b", cfg("node-b"))}
		for name, d := range ds {
			c.waitRegistered(d, 30*time.Second)
			waitNodeStatus(b, c, name, nodes.StatusReady)
		}
		master := c.waitTerm(b, 0, 30*time.Second).Node
		start := map[string]time.Duration{}
		for name, d := range ds {
			_, cpu, err := procUsage(d.cmd.Process.Pid)
			if err != nil {
				b.Fatal(err)
			}
			start[name] = cpu
		}
		<-time.After(idleWindow)
		for name, d := range ds {
			rss, cpu, err := procUsage(d.cmd.Process.Pid)
			if err != nil {
				b.Fatal(err)
			}
			role := "standby"
			if name == master {
				role = "master"
			}
			b.ReportMetric(float64(rss)/(1<<20), "rss-"+role+"-MB")
			b.ReportMetric((cpu - start[name]).Seconds(), "cpu-s-per-60s-"+role)
		}
	}
}
