package configs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/testkit/testca"
)

// problemAt fails unless err lists a problem at path whose message holds
// msg (and names line, when line > 0).
func problemAt(t *testing.T, err error, path, msg string, line int) {
	t.Helper()
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("error is %T, want *Error: %v", err, err)
	}
	for _, p := range cerr.Problems {
		if p.Path == path && strings.Contains(p.Msg, msg) && (line == 0 || p.Line == line) {
			return
		}
	}
	t.Fatalf("no problem at %q containing %q (line %d); got:\n%v", path, msg, line, err)
}

// TestHostileConfigs: values that passed before and must not, each refused
// with its key path and line, never echoing more than a short excerpt.
func TestHostileConfigs(t *testing.T) {
	twoReports := `
workflows:
  - {name: a, table: app.t, id_column: id, status_column: s, tasks: [{name: x, begin: A, interim: B, end: C, failed: F}]}
  - {name: b, table: public.t2, id_column: id, status_column: s, tasks: [{name: x, begin: A, interim: B, end: C, failed: F}]}
  - {name: c, table: t2, id_column: id, status_column: s, tasks: [{name: x, begin: D, interim: E, end: G, failed: H}]}
`
	// Cases that set database or etcd themselves start from these.
	const noDB = "\netcd:\n  endpoints: [\"127.0.0.1:2379\"]\n"
	const noEtcd = "\ndatabase: {dsn_env: ENGINEHEALTH_DSN}\n"
	cases := []struct {
		name, yaml, path, msg string
		line                  int
	}{
		{"NaN fraction", "health: {max_unresponsive_fraction: .nan}\n", "health.max_unresponsive_fraction", "finite number", 5},
		{"infinite fraction", "health: {max_unresponsive_fraction: .inf}\n", "health.max_unresponsive_fraction", "finite number", 5},
		{"fraction as a string", "health: {max_unresponsive_fraction: \"0.5\"}\n", "health.max_unresponsive_fraction", "want a number", 5},
		{"NaN error fraction", "failover: {max_error_fraction: .nan}\n", "failover.max_error_fraction", "finite number", 5},
		{"explicit zero grade window", "failover: {window: 0s}\n", "failover.window", "omit the key", 5},
		{"NaN jitter", workflow + "        on_failure: {strategy: retry, backoff: {jitter: .NaN}}\n", "workflows[0].tasks[0].on_failure.backoff.jitter", "finite number", 20},
		{"NUL in a state name", strings.Replace(workflow, "interim: B", "interim: \"B\\0\"", 1), "workflows[0].tasks[0].interim", "control character", 16},
		{"escape in a state name", strings.Replace(workflow, "end: C", "end: \"C\\e[2J\"", 1), "workflows[0].tasks[0].end", "control character", 17},
		{"padded state name", strings.Replace(workflow, "end: C", "end: \" C\"", 1), "workflows[0].tasks[0].end", "white space", 17},
		{"fractional batch size", "recovery: {batch_size: 10.5}\n", "recovery.batch_size", "want an integer", 5},
		{"quoted batch size", "recovery: {batch_size: \"10\"}\n", "recovery.batch_size", "want an integer", 5},
		{"negative @every", "health: {schedule: \"@every -1s\"}\n", "health.schedule", "\"@every -1s\": @every -1s: the period must be at least 1s", 5},
		{"nanosecond @every", "health: {schedule: \"@every 1ns\"}\n", "health.schedule", "at least 1s", 5},
		{"schedule that never fires", "health: {schedule: \"0 0 30 2 *\"}\n", "health.schedule", "never fires", 5},
		{"port out of range", "api: {listen: \":99999\"}\n", "api.listen", "port", 5},
		{"advertise with a path", "api: {advertise: \"host:8642/admin\"}\n", "api.advertise", "without scheme, user or path", 5},
		{"advertise with an unknown scheme", "api: {advertise: \"ftp://host:8642\"}\n", "api.advertise", "want host:port, http://host:port or https://host:port", 5},
		{"advertise https without api.tls", "api: {advertise: \"https://host:8642\"}\n", "api.advertise", "set api.tls", 5},
		{"advertise URL without port", "api: {advertise: \"https://host\"}\n", "api.advertise", "port", 5},
		{"advertise without host", "api: {advertise: \":8642\"}\n", "api.advertise", "host is required", 5},
		{"listen on every address without advertise", "api: {listen: \"0.0.0.0:8642\"}\n", "api.advertise", "required when api.listen (\"0.0.0.0:8642\") binds every address", 5},
		{"listen without host, without advertise", "api: {listen: \":8642\"}\n", "api.advertise", "e.g. 10.0.0.5:8642", 5},
		{"listen on [::] without advertise", "api: {listen: \"[::]:0\"}\n", "api.advertise", "binds every address", 5},
		{"huge lease TTL", noEtcd + "etcd: {endpoints: [\"a:1\"], lease_ttl: 2000000h}\n", "etcd.lease_ttl", "at most 10m", 3},
		{"system schema", noDB + "database: {dsn_env: ENGINEHEALTH_DSN, schema: pg_catalog}\n", "database.schema", "system schema", 4},
		{"information_schema", noDB + "database: {dsn_env: ENGINEHEALTH_DSN, schema: information_schema}\n", "database.schema", "system schema", 4},
		{"two workflows on one table and state column", twoReports, "workflows[2].table", "already the table of workflows[1]", 9},
		{"second document", "---\nnode: {name: other}\n", docPath, "second YAML document", 6},
		{"non_retryable without error_column", workflow + "        on_interrupt: {strategy: retry, non_retryable: [timeout]}\n", "workflows[0].tasks[0].on_interrupt.non_retryable", "error_column", 20},
		{"duration that is no duration", "node: {heartbeat_interval: fast}\n", "node.heartbeat_interval", `"fast" is not a duration`, 5},
		{"duplicate key", "node: {name: a}\nnode: {name: b}\n", "node", "already defined", 6},
		{"duplicate nested key", "node: {name: a, name: b}\n", "node", "already defined", 5},
		{"tab indentation", "node:\n\tname: a\n", "node.name", "YAML syntax", 6},
		{"junk line", "node:\n  name: a\njunk here\n", docPath, "YAML syntax", 7},
		{"anchor and alias", "x: &a [1]\ny: *a\n", "x", "anchors and aliases", 5},
		{"merge key", "node:\n  <<: {name: a}\n", `node."<<"`, "merge keys", 6},
		{"deep flow nesting", "node: {name: " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "}\n", "node", "nested more than", 5},
		{"deep block nesting", "node:\n" + strings.Repeat("- ", 100) + "x\n", "node[0][0][0][0][0][0][0][0][0][0][0]…", "nested more than", 6},
		{"mapping for a string", "node: {name: {first: a}}\n", "node.name", "want a string, got a mapping", 5},
		{"list for a mapping", "node: [a, b]\n", "node", "want a mapping", 5},
		{"huge value excerpted", "node: {name: \"" + strings.Repeat("x", 3000) + "\"}\n", "node.name", "…(3000 bytes)", 5},
		{"too long a value", "node: {name: \"" + strings.Repeat("x", 5000) + "\"}\n", "node.name", "longer than 4096 bytes", 5},
		{"password in a bad endpoint", noEtcd + "etcd: {endpoints: [\"http://root:s3cr3t@host:99999\"]}\n", "etcd.endpoints[0]", "port", 0},
		{"password in endpoints given as a string", noEtcd + "etcd: {endpoints: \"http://u:s3cr3t@h:1\"}\n", "etcd.endpoints", "want a list", 3},
		{"password in an endpoint with a tab", noEtcd + "etcd: {endpoints: [\"http://u:s3cr3t@h:1\\t\"]}\n", "etcd.endpoints[0]", "control character", 3},
		{"password in an endpoint without scheme and port", noEtcd + "etcd: {endpoints: [\"u:s3cr3t@h\"]}\n", "etcd.endpoints[0]", "not a number", 0},
		{"password in an endpoint without host", noEtcd + "etcd: {endpoints: [\"u:s3cr3t@\"]}\n", "etcd.endpoints[0]", "", 0},
		{"password at the start of a huge endpoint", noEtcd + "etcd: {endpoints: [\"http://u:s3cr3t" + strings.Repeat("S", 5000) + "@h:1\"]}\n", "etcd.endpoints[0]", "longer than", 3},
		{"endpoint without a host", noEtcd + "etcd: {endpoints: [\"http://u:s3cr3t@:1\"]}\n", "etcd.endpoints[0]", "host is required", 0},
		{"endpoint given twice", noEtcd + "etcd: {endpoints: [\"h:1\", \"h:2\", \"h:1\"]}\n", "etcd.endpoints[2]", "same as etcd.endpoints[0]", 0},
		{"explicit zero trust margin", noEtcd + "etcd: {endpoints: [\"a:1\"], trust_margin: 0s}\n", "etcd.trust_margin", "omit the key for the default (1s)", 3},
		{"explicit zero batch size", "recovery: {batch_size: 0}\n", "recovery.batch_size", "omit the key", 5},
		{"explicit zero fraction", "health: {max_unresponsive_fraction: 0}\n", "health.max_unresponsive_fraction", "omit the key", 5},
		{"explicit empty schedule", "health: {schedule: \"\"}\n", "health.schedule", "omit the key", 5},
		{"explicit zero sweep interval", "health: {sweep_interval: 0s}\n", "health.sweep_interval", "omit the key for the default (10m0s)", 5},
		{"explicit zero claim timeout", strings.Replace(workflow, "claim_timeout: 1m", "claim_timeout: 0", 1), "workflows[0].tasks[0].claim_timeout", "omit the key", 19},
		{"missing claims: line of the workflow", strings.Replace(workflow, "    claims: {table: app.claim}\n", "", 1), "workflows[0].claims", "required", 7},
		{"missing end: line of the task", strings.Replace(workflow, "        end: C\n", "", 1), "workflows[0].tasks[0].end", "required", 14},
		{"tag on an integer", "recovery: {batch_size: !!str 5}\n", "recovery.batch_size", "YAML tags", 5},
		{"local tag", "log: {level: !custom info}\n", "log.level", "YAML tags", 5},
		{"listen host with a space", "api: {listen: \"a b:80\"}\n", "api.listen", "not an IP address or a DNS name", 5},
		{"listen host out of range", "api: {listen: \"999.1.1.1:80\"}\n", "api.listen", "not a valid IP address", 5},
		{"advertise the unspecified address", "api: {advertise: \"0.0.0.0:8642\"}\n", "api.advertise", "no address another node can reach", 5},
		{"advertise the unspecified IPv6 address", "api: {advertise: \"[::]:8642\"}\n", "api.advertise", "no address another node can reach", 5},
		{"port with a sign", "api: {listen: \"127.0.0.1:+80\"}\n", "api.listen", "port", 5},
		{"advertise a v4-mapped unspecified address", "api: {advertise: \"[::ffff:0.0.0.0]:8642\"}\n", "api.advertise", "no address another node can reach", 5},
		{"millisecond heartbeat", "node: {heartbeat_interval: 1ms}\n", "node.heartbeat_interval", "at least 100ms", 5},
		{"microsecond statement timeout", noDB + "database: {dsn_env: ENGINEHEALTH_DSN, statement_timeout: 999us}\n", "database.statement_timeout", "at least 1s", 4},
		{"endpoint with a path", noEtcd + "etcd: {endpoints: [\"http://host:2379/v3\"]}\n", "etcd.endpoints[0]", "without a path", 0},
		{"too many connections", noDB + "database: {dsn_env: ENGINEHEALTH_DSN, max_open_conns: 100000}\n", "database.max_open_conns", "between 2 and 1000", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			yaml := minimal + c.yaml
			if strings.HasPrefix(c.yaml, noDB) || strings.HasPrefix(c.yaml, noEtcd) {
				yaml = c.yaml
			}
			_, err := Parse([]byte(yaml), "hostile.yaml", testEnv)
			if err == nil {
				t.Fatalf("accepted:\n%s", c.yaml)
			}
			problemAt(t, err, c.path, c.msg, c.line)
			if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "SSSS") {
				t.Fatalf("a password is echoed: %v", err)
			}
			if len(err.Error()) > 2000 {
				t.Fatalf("message of %d bytes: a bad value is echoed whole", len(err.Error()))
			}
		})
	}
}

// TestAllProblemsAtOnce: an unknown key, a bad duration and a bad value in
// one file are all reported, each with its path and line.
func TestAllProblemsAtOnce(t *testing.T) {
	yaml := minimal + "bogus: 1\nnode: {heartbeat_interval: fast, name: \"a b\"}\nhealth: {max_unresponsive_fraction: 7}\nrecovery: {batch_size: 1.5}\n"
	_, err := Parse([]byte(yaml), "x.yaml", testEnv)
	problemAt(t, err, "bogus", "unknown key", 5)
	problemAt(t, err, "node.heartbeat_interval", "not a duration", 6)
	problemAt(t, err, "node.name", "not a safe name", 6)
	problemAt(t, err, "health.max_unresponsive_fraction", "(0, 1]", 7)
	problemAt(t, err, "recovery.batch_size", "want an integer", 8)
	var cerr *Error
	errors.As(err, &cerr)
	for _, p := range cerr.Problems {
		if p.Path == "" {
			t.Errorf("problem without a key path: %v", p)
		}
	}
	// A value that could not be decoded gets one problem, not a second
	// one from validation of the default left in its place.
	if n := strings.Count(err.Error(), "node.heartbeat_interval"); n != 1 {
		t.Errorf("node.heartbeat_interval named %d times:\n%v", n, err)
	}
}

// TestFilesAreBounded: the configuration and secret files must be regular
// files within their size limits; FIFOs and devices are refused at once,
// never read.
func TestFilesAreBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte(minimal+"# "+strings.Repeat("x", 2<<20)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bigSecret := filepath.Join(dir, "dsn")
	if err := os.WriteFile(bigSecret, []byte(strings.Repeat("x", 100<<10)), 0o600); err != nil {
		t.Fatal(err)
	}
	n := 0
	cfgWith := func(extra string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("cfg%d.yaml", n))
		if err := os.WriteFile(p, []byte("etcd: {endpoints: [\"a:1\"]}\n"+extra), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, path, key, msg string
	}{
		{"FIFO config", fifo, docPath, "not a regular file (a FIFO)"},
		{"device config", "/dev/zero", docPath, "not a regular file (a character device)"},
		{"directory config", dir, docPath, "not a regular file (a directory)"},
		{"oversized config", big, docPath, "more than the limit of 1048576"},
		{"FIFO dsn_file", cfgWith("database: {dsn_file: " + fifo + "}\n"), "database.dsn_file", "a FIFO"},
		{"device token_file", cfgWith("database: {dsn_env: X}\napi: {token_file: /dev/zero}\n"), "api.token_file", "a character device"},
		{"oversized dsn_file", cfgWith("database: {dsn_file: " + bigSecret + "}\n"), "database.dsn_file", "more than the limit of 65536"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := Load(c.path)
				done <- err
			}()
			select {
			case err := <-done:
				problemAt(t, err, c.key, c.msg, 0)
			case <-time.After(5 * time.Second):
				t.Fatal("Load blocked on the file")
			}
		})
	}
}

// TestParseMemoryIsBounded: inputs that took gigabytes (deep nesting, huge
// lists, alias expansion) are refused within a small allocation budget.
func TestParseMemoryIsBounded(t *testing.T) {
	const budget = 64 << 20
	var block strings.Builder
	for i := range 1400 {
		block.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	cases := map[string]string{
		"100k [ in 200 KB":    "a: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n",
		"900 KB flow list":    "a: [" + strings.Repeat("1,", 450000) + "1]\n",
		"20k nested dashes":   "a:\n" + strings.Repeat("- ", 20000) + "x\n",
		"1400 nested keys":    block.String(),
		"alias bomb":          "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n",
		"50k lines of 'k: v'": strings.Repeat("k: v\n", 50000),
		"19k unknown keys":    manyKeys(19000),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if len(data) > MaxConfigBytes {
				t.Fatalf("case of %d bytes exceeds the file limit; it tests nothing", len(data))
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Parse([]byte(data), "bomb.yaml", testEnv)
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("accepted")
			}
			if used := after.TotalAlloc - before.TotalAlloc; used > budget {
				t.Fatalf("allocated %d MB, budget %d MB", used>>20, budget>>20)
			}
		})
	}
}

// TestWarnings: valid settings an operator probably does not want are
// warned about, with their key path.
func TestWarnings(t *testing.T) {
	cfg, err := Parse([]byte("database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"a:1\"], lease_ttl: 3s}\n"), "w.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, w := range cfg.Warnings {
		paths = append(paths, w.Path)
	}
	if got := strings.Join(paths, ","); got != "etcd.endpoints,etcd.trust_margin" {
		t.Fatalf("warnings %v", cfg.Warnings)
	}
	cfg, err = Parse([]byte("database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"a:1\", \"b:1\", \"c:1\"]}\n"), "w.yaml", testEnv)
	if err != nil || len(cfg.Warnings) != 0 {
		t.Fatalf("defaults with three endpoints: %v %v", err, cfg.Warnings)
	}
	// Retry settings of a policy that never retries.
	three := "database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"a:1\", \"b:1\", \"c:1\"]}\n"
	idle := three + strings.Replace(workflow, "        claim_timeout: 1m\n",
		"        claim_timeout: 1m\n        on_interrupt: {strategy: hold, max_attempts: 3}\n        on_failure: {backoff: {kind: fixed}}\n", 1)
	cfg, err = Parse([]byte(idle), "w.yaml", testEnv)
	if err != nil || len(cfg.Warnings) != 2 || cfg.Warnings[0].Path != "workflows[0].tasks[0].on_interrupt" ||
		!strings.Contains(cfg.Warnings[1].Msg, "strategy none never retries") {
		t.Fatalf("idle policy keys: %v %v", err, cfg.Warnings)
	}
	// An atomic task's on_interrupt written without a strategy: none,
	// not the atomic default (outside review: silent).
	atomic := three + strings.Replace(workflow, "        claim_timeout: 1m\n",
		"        claim_timeout: 1m\n        atomic_internal: true\n        on_interrupt: {}\n", 1)
	cfg, err = Parse([]byte(atomic), "w.yaml", testEnv)
	if err != nil || len(cfg.Warnings) != 1 || cfg.Warnings[0].Path != "workflows[0].tasks[0].on_interrupt" ||
		!strings.Contains(cfg.Warnings[0].Msg, "no strategy: none, an interrupted instance fails at once") {
		t.Fatalf("atomic task, empty on_interrupt: %v %v", err, cfg.Warnings)
	}
}

// TestEndpointCredentials: userinfo in an etcd endpoint never shows, and
// is handed to the client apart.
func TestEndpointCredentials(t *testing.T) {
	cfg, err := Parse([]byte("database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"http://root:s3cr3t@h1:2379\", \"http://root:s3cr3t@h2:2379\"]}\n"), "c.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if shown := strings.Join(cfg.Etcd.RedactedEndpoints(), ","); strings.Contains(shown, "s3cr3t") || !strings.Contains(shown, "h1:2379") {
		t.Fatalf("redacted endpoints %q", shown)
	}
	eps, user, pass := cfg.Etcd.ClientEndpoints()
	if strings.Join(eps, ",") != "http://h1:2379,http://h2:2379" || user != "root" || pass != "s3cr3t" {
		t.Fatalf("client endpoints %v, user %q, password %q", eps, user, pass)
	}
}

// TestDSNCheckedLikeTheDriver: config check refuses what run's driver
// would refuse, naming the key, without the password.
func TestDSNCheckedLikeTheDriver(t *testing.T) {
	for _, dsn := range []string{
		"host=127.0.0.1 user=eh password='s3cr3t dbname=eh sslmode=disable",
		"host=127.0.0.1 user=eh password=s3cr3t dbname=eh sslmode=bogus",
		"postgres://eh:s3cr3t@127.0.0.1:5432/eh?sslmode=disable&connect_timeout=abc",
		"postgres://eh@127.0.0.1:5432/eh?password=s3cr3t&sslmode=maybe",
		"postgres://eh:s3cr3t#x@127.0.0.1:5432/eh",
		"postgres://eh:s3cr3t/x@127.0.0.1/eh",
		"postgres://eh:s3cr3t?x@127.0.0.1/eh",
		"mysql://eh:s3cr3t@127.0.0.1/eh",
		"just-a-word",
	} {
		_, err := Parse([]byte(minimal), "c.yaml", env("ENGINEHEALTH_DSN", dsn))
		if err == nil {
			t.Errorf("DSN %q accepted", dsn)
			continue
		}
		problemAt(t, err, "database", "DSN is malformed", 0)
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("DSN %q: the password is echoed: %v", dsn, err)
		}
	}
	// The driver's message keeps its words whatever the password: "p"
	// masked in it made "port" "xxxxxort" (outside review).
	for dsn, want := range map[string]string{
		"host=127.0.0.1 port=xyz user=eh password=p dbname=eh":   `wrong value for \"port\": strconv.ParseUint: parsing \"xyz\": invalid syntax`,
		"postgres://eh:o@127.0.0.1:5432/eh?connect_timeout=soon": "connect_timeout",
		"host=127.0.0.1 user=eh password='p dbname=eh":           "the password cannot be read",
		// The sidecar writes: a DSN that asks for a standby is a
		// configuration error, found by config check (outside review).
		"postgres://eh:o@127.0.0.1/eh?target_session_attrs=standby":        "target_session_attrs=standby: the sidecar writes",
		"host=127.0.0.1 dbname=eh target_session_attrs=read-only":          "target_session_attrs=read-only: the sidecar writes",
		"host=127.0.0.1 dbname=eh target_session_attrs=prefer-standby":     "target_session_attrs=prefer-standby: the sidecar writes",
		"postgres://eh:o@127.0.0.1:5432,127.0.0.1:5433/eh?sslmode=disable": "use key=value pairs: host=a,b port=5432,5433",
	} {
		_, err := Parse([]byte(minimal), "c.yaml", env("ENGINEHEALTH_DSN", dsn))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "xxxxx") {
			t.Errorf("DSN %q: %v, want %s named", dsn, err, want)
		}
	}
	for _, dsn := range []string{
		"host=/var/run/postgresql dbname=eh",
		"postgresql://eh:p%40ss@db.example:5432/eh?sslmode=verify-full&connect_timeout=5",
		"host=pg1,pg2 port=5432,5433 dbname=eh target_session_attrs=read-write",
		"postgres://eh:o@127.0.0.1/eh?target_session_attrs=primary",
	} {
		if _, err := Parse([]byte(minimal), "c.yaml", env("ENGINEHEALTH_DSN", dsn)); err != nil {
			t.Errorf("DSN %q refused: %v", dsn, err)
		}
	}
}

// TestByteOrderMark: a UTF-8 byte order mark before the first key is not
// part of it.
func TestByteOrderMark(t *testing.T) {
	if _, err := Parse([]byte("\ufeff"+strings.TrimPrefix(minimal, "\n")), "bom.yaml", testEnv); err != nil {
		t.Fatal(err)
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "unknown_key_%05d: v\n", i)
	}
	return b.String()
}

// TestManyProblemsAreCapped: a file with many problems reports the first
// 100 and how many more there are, not a report of megabytes; a mapping
// of more than 2,000 keys is refused before it is parsed.
func TestManyProblemsAreCapped(t *testing.T) {
	_, err := Parse([]byte(minimal+manyKeys(1500)), "many.yaml", testEnv)
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("%v", err)
	}
	if len(cerr.Problems) != 101 || !strings.Contains(cerr.Problems[100].Msg, "1400 more problems not listed") {
		t.Fatalf("%d problems, last %+v", len(cerr.Problems), cerr.Problems[len(cerr.Problems)-1])
	}
	if n := len(err.Error()); n > 32<<10 {
		t.Fatalf("report of %d bytes", n)
	}
	_, err = Parse([]byte(minimal+manyKeys(19000)), "many.yaml", testEnv)
	problemAt(t, err, "unknown_key_01998", "more than 2000 keys or items", 2003) // the 2,001st key
}

// TestTokenCharacters: a token that cannot travel in an Authorization
// header is refused (without being quoted); a short one is warned about.
func TestTokenCharacters(t *testing.T) {
	for _, tok := range []string{"ab\x1bcdefghijklmnopq", "with a space in it, long enough", "caf\u00e9-0123456789abcdef", "bad\xffutf8-0123456789"} {
		_, err := Parse([]byte(minimal+"api: {token_env: TOK}\n"), "t.yaml", env("ENGINEHEALTH_DSN", "postgres://h/db", "TOK", tok))
		problemAt(t, err, "api.token_env", "only visible ASCII", 0)
		if strings.Contains(err.Error(), tok) {
			t.Fatalf("the token is quoted: %v", err)
		}
	}
	_, err := Parse([]byte(minimal+"api: {token_env: TOK}\n"), "t.yaml", env("ENGINEHEALTH_DSN", "postgres://h/db", "TOK", strings.Repeat("a", 20000)))
	problemAt(t, err, "api.token_env", "more than 1024", 0)
	cfg, err := Parse([]byte(minimal+"api: {token_env: TOK}\n"), "t.yaml", env("ENGINEHEALTH_DSN", "postgres://h/db", "TOK", "short"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) == 0 || !strings.Contains(fmt.Sprint(cfg.Warnings), "at least 16") {
		t.Fatalf("no warning about a 5-character token: %v", cfg.Warnings)
	}
}

// TestDSNTLSFiles: the TLS files a DSN names are read by config check as
// the driver will read them: a missing root CA, one that is not PEM, a
// client certificate without its key or with another key are refused,
// naming the DSN parameter and the file, never its content.
func TestDSNTLSFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := testca.New(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	a, err := ca.Issue("a", testca.Options{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.Issue("b", testca.Options{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not-pem.crt")
	if err := os.WriteFile(notPEM, []byte("SECRET-CONTENT not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A FIFO or a device never blocks the check (outside review: a FIFO
	// as sslrootcert hung config check for good).
	fifo := filepath.Join(dir, "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	base := "postgres://eh:s3cr3t@db.example:5432/eh?sslmode=verify-full"
	for dsn, want := range map[string]string{
		base + "&sslrootcert=" + fifo:                                     "sslrootcert " + fifo + ": not a regular file (a FIFO)",
		base + "&sslrootcert=/dev/zero":                                   "sslrootcert /dev/zero: not a regular file (a character device)",
		base + "&sslcert=" + fifo + "&sslkey=" + a.KeyFile:                "sslcert " + fifo + ": not a regular file (a FIFO)",
		base + "&sslcert=" + a.CertFile + "&sslkey=/dev/zero":             "sslkey /dev/zero: not a regular file (a character device)",
		base + "&sslrootcert=" + filepath.Join(dir, "absent.pem"):         "sslrootcert: open " + filepath.Join(dir, "absent.pem"),
		base + "&sslrootcert=" + notPEM:                                   "sslrootcert " + notPEM + ": no PEM certificate",
		base + "&sslcert=" + a.CertFile:                                   "sslcert " + a.CertFile + " without sslkey",
		base + "&sslkey=" + a.KeyFile:                                     "sslkey " + a.KeyFile + " without sslcert",
		base + "&sslcert=" + a.CertFile + "&sslkey=" + b.KeyFile:          "does not match",
		"host=db.example user=eh sslmode=verify-ca sslrootcert=" + notPEM: "no PEM certificate",
	} {
		_, err := Parse([]byte(minimal), "c.yaml", env("ENGINEHEALTH_DSN", dsn))
		if err == nil {
			t.Errorf("DSN %q accepted", dsn)
			continue
		}
		problemAt(t, err, "database", want, 0)
		if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "SECRET-CONTENT") {
			t.Errorf("DSN %q: a secret is echoed: %v", dsn, err)
		}
	}
	good := base + "&sslrootcert=" + ca.CertFile + "&sslcert=" + a.CertFile + "&sslkey=" + a.KeyFile
	if _, err := Parse([]byte(minimal), "c.yaml", env("ENGINEHEALTH_DSN", good)); err != nil {
		t.Errorf("DSN with good TLS files: %v", err)
	}
}
