package configs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

var testEnv = env("ENGINEHEALTH_DSN", "postgres://eh:s3cret@127.0.0.1:5432/eh?sslmode=disable")

func TestExampleIsValid(t *testing.T) {
	data, err := os.ReadFile("enginehealth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data, "enginehealth.yaml", testEnv)
	if err != nil {
		t.Fatalf("example config rejected: %v", err)
	}
	if got := len(cfg.Workflows); got != 2 {
		t.Fatalf("workflows: got %d, want 2", got)
	}
	send := cfg.Workflows[0].Tasks[0]
	if send.OnInterrupt.Strategy != recovery.StrategyRetry || send.OnInterrupt.MaxAttempts != 3 || *send.OnInterrupt.Backoff.Jitter != 0.2 {
		t.Errorf("on_interrupt not decoded: %+v", send.OnInterrupt)
	}
	if got := cfg.Workflows[1].Tasks[0].EndStates(); strings.Join(got, ",") != "Rendered,Empty" {
		t.Errorf("ends: got %v", got)
	}
	if cfg.Database.DSN == "" {
		t.Error("DSN not resolved from the environment")
	}
}

// TestQuickstartIsValid: the configuration of the README's quick start
// loads, with its one warning (a single etcd endpoint) and the demo
// engine's workflow.
func TestQuickstartIsValid(t *testing.T) {
	data, err := os.ReadFile("quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data, "quickstart.yaml", env("ENGINEHEALTH_DSN", "postgres://quickstart:quickstart@127.0.0.1:5432/quickstart?sslmode=disable",
		"ENGINEHEALTH_TOKEN", "quickstart-token-0123456789"))
	if err != nil {
		t.Fatalf("quick start config rejected: %v", err)
	}
	if len(cfg.Warnings) != 1 || cfg.Warnings[0].Path != "etcd.endpoints" {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
	if cfg.Node.Name != "node-a" || cfg.API.Token == "" || len(cfg.Workflows) != 1 || cfg.Workflows[0].Table != "demo.orders" {
		t.Fatalf("decoded: node %q, token set %v, workflows %+v", cfg.Node.Name, cfg.API.Token != "", cfg.Workflows)
	}
	if ship := cfg.Workflows[0].Tasks[1]; ship.OnInterrupt.Strategy != recovery.StrategyHold {
		t.Errorf("ship on_interrupt: %+v", ship.OnInterrupt)
	}
}

// minimal is the smallest valid configuration; broken cases edit it.
const minimal = `
database: {dsn_env: ENGINEHEALTH_DSN}
etcd:
  endpoints: [127.0.0.1:2379]
`

func TestDefaults(t *testing.T) {
	cfg, err := Parse([]byte(minimal), "min.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"heartbeat", cfg.Node.HeartbeatInterval, nodes.DefaultHeartbeatInterval},
		{"schema", cfg.Database.Schema, pgdb.DefaultSchema},
		{"prefix", cfg.Etcd.Prefix, leader.DefaultPrefix},
		{"lease_ttl", cfg.Etcd.LeaseTTL, leader.DefaultLeaseTTL},
		{"auto_sync_interval", *cfg.Etcd.AutoSyncInterval, DefaultAutoSyncInterval},
		{"schedule", cfg.Health.Schedule, health.DefaultSchedule},
		{"not_responding_after", cfg.Health.NotRespondingAfter, health.DefaultNotRespondingAfter},
		{"forget_after", cfg.Health.ForgetAfter, health.DefaultForgetAfter},
		{"fraction", cfg.Health.MaxUnresponsiveFraction, health.DefaultMaxUnresponsiveFraction},
		{"sweep_interval", cfg.Health.SweepInterval, health.DefaultSweepInterval},
		{"batch", cfg.Recovery.BatchSize, recovery.DefaultBatchSize},
		{"listen", cfg.API.Listen, DefaultListen},
		{"failover.window", cfg.Failover.Window, nodes.DefaultGradeWindow},
		{"failover.quiet_period", cfg.Failover.QuietPeriod, nodes.DefaultQuietPeriod},
		{"failover.max_error_fraction", *cfg.Failover.MaxErrorFraction, nodes.DefaultMaxErrorFraction},
		{"failover.error_not_ready", cfg.Failover.ErrorNotReady, false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	// 0 is a setting of max_error_fraction: no node is ever ERROR.
	cfg, err = Parse([]byte(minimal+"failover: {max_error_fraction: 0}\n"), "zero.yaml", testEnv)
	if err != nil || *cfg.Failover.MaxErrorFraction != 0 {
		t.Fatalf("explicit max_error_fraction 0: %v", err)
	}
}

const workflow = `
workflows:
  - name: wf
    table: app.inst
    id_column: id
    status_column: status
    claimable: true
    claims: {table: app.claim}
    tasks:
      - name: t1
        begin: A
        interim: B
        end: C
        failed: F
        claim_timeout: 1m
`

func TestBrokenConfigs(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		env  func(string) (string, bool)
		path string // key path the message must name
		msg  string // and a fragment of the message
		line int    // when non-zero, the line the message must name
	}{
		{"unknown top-level key", minimal + "bogus: 1\n", nil, "bogus", "unknown key", 5},
		{"unknown nested key", minimal + "node: {name: a, heartbeat: 5s}\n", nil, "node.heartbeat", "unknown key", 5},
		{"unknown key in a task", minimal + workflow + "        colour: red\n", nil, "workflows[0].tasks[0].colour", "unknown key", 20},
		{"duration of the wrong type", minimal + "node: {heartbeat_interval: 5}\n", nil, "node.heartbeat_interval", "is not a duration", 5},
		{"no DSN", "etcd: {endpoints: [\"127.0.0.1:2379\"]}\n", nil, "database", "dsn_file or database.dsn_env is required", 0},
		{"DSN env unset", minimal, env(), "database.dsn_env", "ENGINEHEALTH_DSN is not set", 2},
		{"DSN file missing", "database: {dsn_file: /nonexistent/dsn}\netcd: {endpoints: [\"127.0.0.1:2379\"]}\n", nil, "database.dsn_file", "no such file", 1},
		{"both DSN sources", "database: {dsn_file: x, dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"127.0.0.1:2379\"]}\n", nil, "database.dsn_env", "only one", 0},
		{"no etcd endpoints", "database: {dsn_env: ENGINEHEALTH_DSN}\n", nil, "etcd.endpoints", "at least one", 0},
		{"bad etcd endpoint", "database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [localhost]}\n", nil, "etcd.endpoints[0]", "not host:port", 0},
		{"lease TTL too short", "database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"a:1\"], lease_ttl: 2s}\n", nil, "etcd.lease_ttl", "at least 3s", 0},
		{"trust margin eats the window", "database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"a:1\"], lease_ttl: 3s, trust_margin: 2s}\n", nil, "etcd.trust_margin", "no longer than lease_ttl/3", 0},
		{"not_responding_after too short", minimal + "node: {heartbeat_interval: 5s}\nhealth: {not_responding_after: 10s}\n", nil, "health.not_responding_after", "3 × node.heartbeat_interval", 6},
		{"negative heartbeat", minimal + "node: {heartbeat_interval: -1s}\n", nil, "node.heartbeat_interval", "at least 100ms", 5},
		{"bad schedule", minimal + "health: {schedule: every minute}\n", nil, "health.schedule", "every minute", 5},
		{"fraction out of range", minimal + "health: {max_unresponsive_fraction: 1.5}\n", nil, "health.max_unresponsive_fraction", "(0, 1]", 0},
		{"sweep more often than passes", minimal + "health:\n  schedule: \"@every 1m\"\n  sweep_interval: 30s\n", nil, "health.sweep_interval",
			"30s is shorter than one period of health.schedule (1m0s)", 7},
		{"sweep shorter than the default schedule", minimal + "health: {sweep_interval: 5s}\n", nil, "health.sweep_interval", "one period of health.schedule (15s)", 5},
		{"sweep interval too long", minimal + "health: {sweep_interval: 25h}\n", nil, "health.sweep_interval", "at most 24h0m0s", 5},
		{"negative sweep interval", minimal + "health: {sweep_interval: -10m}\n", nil, "health.sweep_interval", "at least 1s", 5},
		{"sweep interval that is no duration", minimal + "health: {sweep_interval: often}\n", nil, "health.sweep_interval", `"often" is not a duration`, 5},
		{"error fraction out of range", minimal + "failover: {max_error_fraction: 1.5}\n", nil, "failover.max_error_fraction", "[0, 1]", 0},
		{"grade window too long", minimal + "failover: {window: 9000h}\n", nil, "failover.window", "at most", 0},
		{"negative quiet period", minimal + "failover: {quiet_period: -1h}\n", nil, "failover.quiet_period", "at least 1s", 0},
		{"unsafe node name", minimal + "node: {name: \"a b;drop\"}\n", nil, "node.name", "not a safe name", 5},
		{"bad schema identifier", "database: {dsn_env: ENGINEHEALTH_DSN, schema: \"x-y\"}\netcd: {endpoints: [\"a:1\"]}\n", nil, "database.schema", "SQL identifier", 0},
		{"batch size zero is the default, negative is not", minimal + "recovery: {batch_size: -5}\n", nil, "recovery.batch_size", "between 1 and 100000", 0},
		{"bad log level", minimal + "log: {level: loud}\n", nil, "log.level", "loud", 0},
		{"bad on_unexpected_shutdown", minimal + "node: {on_unexpected_shutdown: ignore}\n", nil, "node.on_unexpected_shutdown", "want ack or recover", 5},
		{"interim same as begin", minimal + strings.Replace(workflow, "interim: B\n", "interim: A\n", 1), nil, "workflows[0].tasks[0].interim", "same state as begin", 0},
		{"end and ends", minimal + strings.Replace(workflow, "end: C\n", "end: C\n        ends: [D]\n", 1), nil, "workflows[0].tasks[0].ends", "only one of end and ends", 0},
		{"no end", minimal + strings.Replace(workflow, "        end: C\n", "", 1), nil, "workflows[0].tasks[0].end", "required", 0},
		{"interim shared by two tasks", minimal + workflow + "      - {name: t2, begin: C, interim: B, end: D, failed: G}\n", nil, "workflows[0].tasks[1].interim", "already the interim state of tasks[0]", 0},
		{"claimable without claims", minimal + strings.Replace(workflow, "    claims: {table: app.claim}\n", "", 1), nil, "workflows[0].claims", "required when claimable", 0},
		{"bad table name", minimal + strings.Replace(workflow, "app.inst", "app.inst;drop", 1), nil, "workflows[0].table", "not a valid SQL identifier", 0},
		{"three-part table", minimal + strings.Replace(workflow, "app.inst", "db.app.inst", 1), nil, "workflows[0].table", "schema.table", 0},
		{"missing id column", minimal + strings.Replace(workflow, "    id_column: id\n", "", 1), nil, "workflows[0].id_column", "required", 0},
		{"duplicate workflow", minimal + workflow + strings.Replace(workflow, "workflows:\n", "", 1), nil, "workflows[1].name", "already the name of workflows[0]", 0},
		{"bad strategy", minimal + workflow + "        on_interrupt: {strategy: maybe}\n", nil, "workflows[0].tasks[0].on_interrupt.strategy", "maybe", 0},
		{"bad backoff kind", minimal + workflow + "        on_failure: {strategy: retry, backoff: {kind: cubic}}\n", nil, "workflows[0].tasks[0].on_failure.backoff.kind", "cubic", 0},
		{"jitter out of range", minimal + workflow + "        on_failure: {strategy: retry, backoff: {jitter: 1.5}}\n", nil, "workflows[0].tasks[0].on_failure.backoff.jitter", "[0, 1)", 0},
		{"schedule kind without schedule", minimal + workflow + "        on_failure: {strategy: retry, backoff: {kind: schedule}}\n", nil, "workflows[0].tasks[0].on_failure.backoff.schedule", "required", 0},
		{"max_delay below base", minimal + workflow + "        on_failure: {strategy: retry, backoff: {base: 1m, max_delay: 10s}}\n", nil, "workflows[0].tasks[0].on_failure.backoff.max_delay", "less than base", 0},
		{"base below a millisecond", minimal + workflow + "        on_failure: {strategy: retry, backoff: {base: 1ns}}\n", nil, "workflows[0].tasks[0].on_failure.backoff.base", "1ns is below 1ms", 0},
		{"max_delay below a millisecond", minimal + workflow + "        on_failure: {strategy: retry, backoff: {base: 0s, max_delay: 900us}}\n", nil, "workflows[0].tasks[0].on_failure.backoff.max_delay", "at least 1ms", 0},
		{"schedule entry below a millisecond", minimal + workflow + "        on_failure: {strategy: retry, backoff: {kind: schedule, schedule: [1s, 1us]}}\n", nil, "workflows[0].tasks[0].on_failure.backoff.schedule[1]", "at least 1ms", 0},
		{"bad non_retryable pattern", minimal + workflow + "        on_failure: {non_retryable: [\"(\"]}\n", nil, "workflows[0].tasks[0].on_failure.non_retryable[0]", "missing closing", 0},
		{"non_retryable pattern that matches everything", minimal + workflow + "        on_failure: {non_retryable: [\"x*\"]}\n", nil, "workflows[0].tasks[0].on_failure.non_retryable[0]", "matches every error text", 0},
		{"empty non_retryable pattern", minimal + workflow + "        on_failure: {non_retryable: [x, \"\"]}\n", nil, "workflows[0].tasks[0].on_failure.non_retryable[1]", "an empty pattern matches every error text", 0},
		{"schedule entry above max_delay", minimal + workflow + "        on_failure: {strategy: retry, backoff: {kind: schedule, schedule: [10s, 2h]}}\n", nil, "workflows[0].tasks[0].on_failure.backoff.schedule[1]", "2h0m0s is more than max_delay (1h0m0s)", 0},
		{"a task begins in another's interim state", minimal + workflow + "      - {name: t2, begin: B, interim: D, end: E, failed: G, claim_timeout: 1m}\n", nil, "workflows[0].tasks[1].begin", `"B" is the interim state of tasks[0] (t1)`, 0},
		{"a task ends in another's interim state", minimal + workflow + "      - {name: t2, begin: C, interim: D, ends: [E, B], failed: G, claim_timeout: 1m}\n", nil, "workflows[0].tasks[1].ends[1]", `"B" is the interim state of tasks[0] (t1)`, 0},
		{"non_retryable escape PostgreSQL reads otherwise", minimal + workflow + "        on_failure: {non_retryable: ['\\p{Lu}rror']}\n", nil, "workflows[0].tasks[0].on_failure.non_retryable[0]", `\p means something else to PostgreSQL`, 0},
		{"non_retryable octal escape", minimal + workflow + "        on_failure: {non_retryable: ['fatal\\072']}\n", nil, "workflows[0].tasks[0].on_failure.non_retryable[0]", `\0 means something else`, 0},
		{"on_failure on a shared failed state", minimal + strings.Replace(workflow, "    claimable: true", "    updated_column: u\n    claimable: true", 1) +
			"        on_failure: {strategy: retry}\n      - {name: t2, begin: C, interim: D, end: E, failed: F}\n", nil,
			"workflows[0].tasks[0].on_failure", `failed state "F" is also the failed state of tasks[1] (t2)`, 0},
		{"on_failure without updated_column", minimal + workflow + "        on_failure: {strategy: retry}\n", nil, "workflows[0].tasks[0].on_failure", "needs the workflow's updated_column", 0},
		{"multiplier of a fixed backoff", minimal + workflow + "        on_interrupt: {strategy: retry, backoff: {kind: fixed, multiplier: 3}}\n", nil, "workflows[0].tasks[0].on_interrupt.backoff.multiplier", "only applies to kinds exponential", 0},
		{"multiplier of 1", minimal + workflow + "        on_interrupt: {strategy: retry, backoff: {kind: exponential, multiplier: 1}}\n", nil, "workflows[0].tasks[0].on_interrupt.backoff.multiplier", "greater than 1", 0},
		{"more attempts than the schedule", minimal + workflow + "        on_interrupt: {strategy: retry, max_attempts: 3, backoff: {kind: schedule, schedule: [1s, 1m]}}\n", nil, "workflows[0].tasks[0].on_interrupt.max_attempts", "more than the 2 delays", 0},
		{"negative base", minimal + workflow + "        on_interrupt: {strategy: retry, backoff: {base: -1s}}\n", nil, "workflows[0].tasks[0].on_interrupt.backoff.base", "must be in [0s", 0},
		{"explicit max_attempts 0", minimal + workflow + "        on_interrupt: {strategy: retry, max_attempts: 0}\n", nil, "workflows[0].tasks[0].on_interrupt.max_attempts", "omit the key", 0},
		{"yaml syntax", minimal + "node: [\n", nil, "node", "YAML syntax", 5},
	}
	if len(cases) < 15 {
		t.Fatalf("want at least 15 broken configs, have %d", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := c.env
			if e == nil {
				e = testEnv
			}
			_, err := Parse([]byte(c.yaml), "broken.yaml", e)
			if err == nil {
				t.Fatalf("accepted:\n%s", c.yaml)
			}
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("error is %T, want *Error: %v", err, err)
			}
			for _, p := range cerr.Problems {
				if p.Path == c.path && strings.Contains(p.Msg, c.msg) && (c.line == 0 || p.Line == c.line) {
					return
				}
			}
			t.Errorf("no problem at %q containing %q (line %d); got:\n%v", c.path, c.msg, c.line, err)
		})
	}
}

func TestEveryProblemIsListed(t *testing.T) {
	yaml := minimal + "node: {heartbeat_interval: -1s}\nhealth: {max_unresponsive_fraction: 2}\nlog: {level: loud}\n"
	_, err := Parse([]byte(yaml), "x.yaml", testEnv)
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("want *Error, got %v", err)
	}
	if len(cerr.Problems) != 3 {
		t.Fatalf("want 3 problems, got %d:\n%v", len(cerr.Problems), err)
	}
	if !strings.Contains(err.Error(), "3 problems") {
		t.Errorf("message does not count the problems: %v", err)
	}
}

func TestSecretFromFileRelativeToConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dsn"), []byte("  host=db password=hunter2 \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c.yaml")
	yaml := "database: {dsn_file: dsn}\netcd: {endpoints: [\"a:1\"]}\napi: {token_file: token}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database.DSN != "host=db password=hunter2" || cfg.API.Token != "tok" {
		t.Fatalf("secrets not read and trimmed: %q %q", cfg.Database.DSN, cfg.API.Token)
	}
	if red := cfg.Database.RedactedDSN(); strings.Contains(red, "hunter2") {
		t.Fatalf("redacted DSN shows the password: %s", red)
	}
}

func TestRedactDSN(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:hunter2@h:5432/db?sslmode=disable",
		"postgres://u@h/db?password=hunter2",
		"host=h user=u password=hunter2 dbname=d",
		"host=h password='hun ter2' dbname=d",
	} {
		red := RedactDSN(dsn)
		if strings.Contains(red, "hunter2") || strings.Contains(red, "ter2") {
			t.Errorf("RedactDSN(%q) = %q still shows the password", dsn, red)
		}
		if !strings.Contains(red, "h") {
			t.Errorf("RedactDSN(%q) = %q lost the host", dsn, red)
		}
	}
}

func TestNodeNameDefaultsToHostname(t *testing.T) {
	cfg, err := Parse([]byte(minimal), "m.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	name, err := cfg.NodeName(func() (string, error) { return "host-1.example", nil })
	if err != nil || name != "host-1.example" {
		t.Fatalf("got %q, %v", name, err)
	}
	if _, err := cfg.NodeName(func() (string, error) { return "bad host", nil }); err == nil || !strings.Contains(err.Error(), "node.name") {
		t.Fatalf("unsafe hostname accepted or error does not name node.name: %v", err)
	}
}

func TestDurationsDecoded(t *testing.T) {
	cfg, err := Parse([]byte(minimal+"node: {heartbeat_interval: 250ms}\nhealth: {not_responding_after: 1s}\n"), "d.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Node.HeartbeatInterval != 250*time.Millisecond {
		t.Fatalf("got %s", cfg.Node.HeartbeatInterval)
	}
}

// TestPolicyDefaults: what a task's policies are when the file says
// little: an atomic task is retried at once, at most 10 times; jitter is
// 0.2 unless the kind is random by itself or the file says 0; a zero base
// is a setting; a schedule's length is its max_attempts.
func TestPolicyDefaults(t *testing.T) {
	y := minimal + strings.Replace(workflow, "    claimable: true\n", "    claimable: true\n    updated_column: updated_at\n", 1) + `
        atomic_internal: true
      - name: t2
        begin: C
        interim: D
        end: E
        failed: G
        on_interrupt: {strategy: retry, backoff: {kind: exponential, base: 0s}}
        on_failure: {strategy: retry, backoff: {kind: randomized_exponential}}
      - name: t3
        begin: E
        interim: H
        end: I
        failed: J
        on_interrupt: {strategy: retry, backoff: {kind: schedule, schedule: [1s, 2s, 3s]}}
        on_failure: {strategy: retry, backoff: {kind: fibonacci, jitter: 0}}
`
	cfg, err := Parse([]byte(y), "p.yaml", env("ENGINEHEALTH_DSN", "postgres://u@h/d"))
	if err != nil {
		t.Fatal(err)
	}
	ts := cfg.RecoveryWorkflows()[0].Tasks
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"atomic on_interrupt", ts[0].OnInterrupt.Strategy, recovery.StrategyRetry},
		{"atomic max_attempts", ts[0].OnInterrupt.MaxAttempts, 10},
		{"atomic kind", ts[0].OnInterrupt.Backoff.Kind, recovery.BackoffFixed},
		{"atomic base", ts[0].OnInterrupt.Backoff.Base, time.Duration(0)},
		{"atomic jitter", ts[0].OnInterrupt.Backoff.Jitter, 0.0},
		{"on_failure default", ts[0].OnFailure.Strategy, recovery.StrategyNone},
		{"exponential jitter", ts[1].OnInterrupt.Backoff.Jitter, 0.2},
		{"exponential multiplier", ts[1].OnInterrupt.Backoff.Multiplier, 2.0},
		{"zero base kept", ts[1].OnInterrupt.Backoff.Base, time.Duration(0)},
		{"max_attempts", ts[1].OnInterrupt.MaxAttempts, 2},
		{"randomized jitter", ts[1].OnFailure.Backoff.Jitter, 0.0},
		{"randomized base", ts[1].OnFailure.Backoff.Base, 30 * time.Second},
		{"schedule max_attempts", ts[2].OnInterrupt.MaxAttempts, 3},
		{"schedule jitter", ts[2].OnInterrupt.Backoff.Jitter, 0.0},
		{"explicit jitter 0", ts[2].OnFailure.Backoff.Jitter, 0.0},
		{"max_delay", ts[2].OnFailure.Backoff.MaxDelay, time.Hour},
		{"non-atomic on_interrupt", cfg.RecoveryWorkflows()[0].Tasks[1].AtomicInternal, false},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	// A non-atomic task that configures nothing fails what is interrupted.
	cfg, err = Parse([]byte(minimal+workflow), "p.yaml", env("ENGINEHEALTH_DSN", "postgres://u@h/d"))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.RecoveryWorkflows()[0].Tasks[0].OnInterrupt; p.Strategy != recovery.StrategyNone || p.Backoff.Jitter != 0.2 {
		t.Errorf("non-atomic default on_interrupt %+v", p)
	}
}

// TestEmptyScheduleIsOneProblem: an empty backoff.schedule is reported as
// such, not also as a max_attempts (not set) beyond its 0 delays.
func TestEmptyScheduleIsOneProblem(t *testing.T) {
	_, err := Parse([]byte(minimal+workflow+"        on_interrupt: {strategy: retry, backoff: {kind: schedule, schedule: []}}\n"), "x.yaml", testEnv)
	var cerr *Error
	if !errors.As(err, &cerr) || len(cerr.Problems) != 1 || cerr.Problems[0].Path != "workflows[0].tasks[0].on_interrupt.backoff.schedule" {
		t.Fatalf("want one problem at backoff.schedule, got %v", err)
	}
}

// TestSweepInterval: health.sweep_interval may be as short as one period
// of the schedule (every pass sweeps), and is the checker's setting.
func TestSweepInterval(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want time.Duration
	}{
		{"health: {schedule: \"@every 30s\", sweep_interval: 30s}\n", 30 * time.Second},
		{"health: {sweep_interval: 1h}\n", time.Hour},
		{"health: {schedule: \"*/5 * * * *\", sweep_interval: 5m}\n", 5 * time.Minute},
		{"health: {sweep_interval: 24h}\n", 24 * time.Hour},
		// A schedule longer than a day sweeps every pass (outside review:
		// @weekly was refused, naming a key not in the file).
		{"health: {schedule: \"@weekly\"}\n", 7 * 24 * time.Hour},
		{"health: {schedule: \"@every 48h\", sweep_interval: 48h}\n", 48 * time.Hour},
	} {
		cfg, err := Parse([]byte(minimal+c.yaml), "sweep.yaml", testEnv)
		if err != nil {
			t.Errorf("%q: %v", c.yaml, err)
			continue
		}
		if cfg.Health.SweepInterval != c.want {
			t.Errorf("%q: sweep interval %s, want %s", c.yaml, cfg.Health.SweepInterval, c.want)
		}
	}
}

// TestSweepIntervalDefaultFollowsALongSchedule: without the key the sweep
// interval is 10m, or one period of a schedule longer than that (an
// hourly check sweeps every pass); given, it may not be shorter.
func TestSweepIntervalDefaultFollowsALongSchedule(t *testing.T) {
	cfg, err := Parse([]byte(minimal+"health: {schedule: \"@every 1h\"}\n"), "hourly.yaml", testEnv)
	if err != nil {
		t.Fatalf("hourly schedule: %v", err)
	}
	if cfg.Health.SweepInterval != time.Hour {
		t.Fatalf("hourly schedule: sweep interval %s, want 1h", cfg.Health.SweepInterval)
	}
	_, err = Parse([]byte(minimal+"health: {schedule: \"@every 1h\", sweep_interval: 10m}\n"), "hourly.yaml", testEnv)
	problemAt(t, err, "health.sweep_interval", "10m0s is shorter than one period of health.schedule (1h0m0s)", 5)
}

// TestCredentialFiles: a *_file key written credential:NAME reads NAME in
// $CREDENTIALS_DIRECTORY (systemd's LoadCredential=); without that
// variable, or with a name that is a path, it is refused at the key.
func TestCredentialFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dsn"), []byte("postgres://eh:s3cret@db:5432/eh?sslmode=disable\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := "database: {dsn_file: \"credential:dsn\"}\netcd: {endpoints: [\"h:2379\"]}\napi: {token_file: \"credential:token\"}\n"
	cfg, err := Parse([]byte(doc), "/etc/enginehealth/c.yaml", env("CREDENTIALS_DIRECTORY", dir))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database.DSN != "postgres://eh:s3cret@db:5432/eh?sslmode=disable" || cfg.API.Token != "tok-123" {
		t.Fatalf("DSN %q, token %q: want the credentials' contents", cfg.Database.RedactedDSN(), cfg.API.Token)
	}

	releaseWarned := func(cfg *Config) bool {
		return slices.ContainsFunc(cfg.Warnings, func(p Problem) bool { return strings.Contains(p.Msg, "release-lease cannot reach etcd") })
	}
	if releaseWarned(cfg) {
		t.Fatalf("warnings %v, want none about release-lease (no etcd secret is a credential)", cfg.Warnings)
	}
	// An etcd secret as a credential: valid, with a warning that
	// release-lease (ExecStopPost=, which gets no credentials) cannot use it.
	if err := os.WriteFile(filepath.Join(dir, "etcd-pw"), []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = Parse([]byte("database: {dsn_file: \"credential:dsn\"}\netcd: {endpoints: [\"h:2379\"], username: eh, password_file: \"credential:etcd-pw\"}\n"),
		"c.yaml", env("CREDENTIALS_DIRECTORY", dir))
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(cfg.Warnings, func(p Problem) bool { return p.Path == "etcd.password_file" }); i < 0 || !releaseWarned(cfg) {
		t.Fatalf("warnings %v, want one at etcd.password_file about release-lease", cfg.Warnings)
	}

	_, err = Parse([]byte(doc), "c.yaml", env())
	problemAt(t, err, "database.dsn_file", "CREDENTIALS_DIRECTORY is not set", 0)
	problemAt(t, err, "api.token_file", "LoadCredential=token", 0)

	for _, bad := range []string{"credential:", "credential:../dsn", "credential:a/b", "credential:.."} {
		_, err := Parse([]byte("database: {dsn_file: \""+bad+"\"}\netcd: {endpoints: [\"h:2379\"]}\n"), "c.yaml", env("CREDENTIALS_DIRECTORY", dir))
		problemAt(t, err, "database.dsn_file", "want credential:NAME", 0)
	}
	_, err = Parse([]byte("database: {dsn_file: \"credential:absent\"}\netcd: {endpoints: [\"h:2379\"]}\n"), "c.yaml", env("CREDENTIALS_DIRECTORY", dir))
	problemAt(t, err, "database.dsn_file", filepath.Join(dir, "absent"), 0)
}

// TestLoadDatabase: enginehealth migrate reads the database's secrets
// alone: an operator's shell without the service's API token or etcd
// password in its environment can run it; the file is still checked
// whole, and a missing database secret is still named.
func TestLoadDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "enginehealth.yaml")
	body := `
database: {dsn_env: EH_TEST_LOADDB_DSN}
etcd:
  endpoints: [127.0.0.1:2379]
  username: sidecar
  password_env: EH_TEST_LOADDB_ETCD_PASSWORD
api:
  token_env: EH_TEST_LOADDB_TOKEN
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EH_TEST_LOADDB_DSN", "postgres://eh@db.example/eh")
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "api.token_env") || !strings.Contains(err.Error(), "etcd.password_env") {
		t.Fatalf("Load without the API token and etcd password: %v, want both named", err)
	}
	cfg, err := LoadDatabase(path)
	if err != nil {
		t.Fatalf("LoadDatabase: %v", err)
	}
	if cfg.Database.DSN != "postgres://eh@db.example/eh" || cfg.API.Token != "" || cfg.Etcd.Password != "" {
		t.Fatalf("LoadDatabase resolved DSN %q, token set %v, etcd password set %v", cfg.Database.DSN, cfg.API.Token != "", cfg.Etcd.Password != "")
	}
	// The rest of the file is still checked.
	if err := os.WriteFile(path, []byte(body+"health: {not_responding_after: -1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDatabase(path); err == nil || !strings.Contains(err.Error(), "health.not_responding_after") {
		t.Fatalf("LoadDatabase of a file with a bad key: %v, want it named", err)
	}
	if err := os.Unsetenv("EH_TEST_LOADDB_DSN"); err != nil { // t.Setenv above restores it
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDatabase(path); err == nil || !strings.Contains(err.Error(), "database.dsn_env") {
		t.Fatalf("LoadDatabase without the DSN: %v, want database.dsn_env named", err)
	}
}

// TestLoadEtcd: enginehealth release-lease reads etcd's secrets alone
// (its user's password here; its TLS files likewise): it runs without the
// DSN or the API token in its environment, the file is still checked
// whole, and a missing etcd secret is still named.
func TestLoadEtcd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "enginehealth.yaml")
	body := `
database: {dsn_env: EH_TEST_LOADETCD_DSN}
etcd:
  endpoints: [127.0.0.1:2379]
  username: sidecar
  password_env: EH_TEST_LOADETCD_PASSWORD
api:
  token_env: EH_TEST_LOADETCD_TOKEN
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EH_TEST_LOADETCD_PASSWORD", "etcd-secret")
	cfg, err := LoadEtcd(path)
	if err != nil {
		t.Fatalf("LoadEtcd: %v", err)
	}
	if cfg.Etcd.Password != "etcd-secret" || cfg.Database.DSN != "" || cfg.API.Token != "" {
		t.Fatalf("LoadEtcd resolved etcd password set %v, DSN %q, token set %v", cfg.Etcd.Password != "", cfg.Database.DSN, cfg.API.Token != "")
	}
	if err := os.WriteFile(path, []byte(body+"health: {not_responding_after: -1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadEtcd(path); err == nil || !strings.Contains(err.Error(), "health.not_responding_after") {
		t.Fatalf("LoadEtcd of a file with a bad key: %v, want it named", err)
	}
	if err := os.Unsetenv("EH_TEST_LOADETCD_PASSWORD"); err != nil { // t.Setenv above restores it
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadEtcd(path); err == nil || !strings.Contains(err.Error(), "etcd.password_env") {
		t.Fatalf("LoadEtcd without the etcd password: %v, want etcd.password_env named", err)
	}
}

// TestStateDirectory: the state directory is node.state_dir, else the
// first directory of $STATE_DIRECTORY (systemd's StateDirectory=), else
// none; a relative one is refused, at node.state_dir.
func TestStateDirectory(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		env        []string
		want       string
	}{
		{"neither", "", nil, ""},
		{"systemd", "", []string{"STATE_DIRECTORY", "/var/lib/enginehealth"}, "/var/lib/enginehealth"},
		{"systemd, several", "", []string{"STATE_DIRECTORY", "/var/lib/enginehealth:/var/lib/other"}, "/var/lib/enginehealth"},
		{"the key", "node: {state_dir: /srv/eh}\n", nil, "/srv/eh"},
		{"the key over systemd", "node: {state_dir: /srv/eh}\n", []string{"STATE_DIRECTORY", "/var/lib/enginehealth"}, "/srv/eh"},
	} {
		cfg, err := Parse([]byte(minimal+c.yaml), "c.yaml", env(append([]string{"ENGINEHEALTH_DSN", "postgres://eh@h/eh"}, c.env...)...))
		if err != nil || cfg.Node.StateDirectory != c.want {
			t.Errorf("%s: state directory %q (%v), want %q", c.name, cfg.Node.StateDirectory, err, c.want)
		}
	}
	_, err := Parse([]byte(minimal+"node: {state_dir: var/lib/eh}\n"), "c.yaml", testEnv)
	problemAt(t, err, "node.state_dir", "not an absolute path", 0)
	_, err = Parse([]byte(minimal), "c.yaml", env("ENGINEHEALTH_DSN", "postgres://eh@h/eh", "STATE_DIRECTORY", "relative"))
	problemAt(t, err, "node.state_dir", "$STATE_DIRECTORY", 0)
}
