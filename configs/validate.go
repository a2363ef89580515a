package configs

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/internal/pgdb"
	"github.com/goccy/go-yaml/ast"
	"github.com/robfig/cron/v3"
)

var (
	// safeName is a node or workflow name: it appears in etcd keys, log
	// lines and URLs.
	safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	// sqlIdent is one part of a table or column name, always quoted when
	// used; the catalog check at start-up confirms it exists.
	sqlIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)
)

// CronParser parses health.schedule; the daemon schedules with the same one.
var CronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

type validator struct {
	file     *ast.File
	problems []Problem
}

func (v *validator) add(path, format string, args ...any) {
	v.problems = append(v.problems, Problem{Path: path, Line: lineOf(v.file, path), Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) positive(path string, d time.Duration) bool {
	if d <= 0 {
		v.add(path, "must be a positive duration, got %s", d)
		return false
	}
	return true
}

func (c *Config) validate(v *validator) {
	// node
	if c.Node.Name != "" && !safeName.MatchString(c.Node.Name) {
		v.add("node.name", "%q is not a safe name (letters, digits, '.', '_', '-'; at most 63; starts with a letter or digit)", c.Node.Name)
	}
	hbOK := v.positive("node.heartbeat_interval", c.Node.HeartbeatInterval)
	v.positive("node.shutdown_timeout", c.Node.ShutdownTimeout)
	if o := c.Node.OnUnexpectedShutdown; o != UnexpectedShutdownAck && o != UnexpectedShutdownRecover {
		v.add("node.on_unexpected_shutdown", "%q: want ack or recover", o)
	}

	// database
	if !sqlIdent.MatchString(c.Database.Schema) {
		v.add("database.schema", "%q is not a valid SQL identifier", c.Database.Schema)
	}
	v.positive("database.statement_timeout", c.Database.StatementTimeout)
	v.positive("database.connect_timeout", c.Database.ConnectTimeout)
	if c.Database.MaxOpenConns < 2 {
		v.add("database.max_open_conns", "must be at least 2, got %d", c.Database.MaxOpenConns)
	}
	if c.Database.DSN != "" {
		if err := checkDSN(c.Database.DSN); err != nil {
			v.add("database", "the DSN is malformed: %v", err)
		}
	}

	// etcd
	if len(c.Etcd.Endpoints) == 0 {
		v.add("etcd.endpoints", "at least one endpoint is required")
	}
	for i, ep := range c.Etcd.Endpoints {
		if err := checkEndpoint(ep); err != nil {
			v.add(fmt.Sprintf("etcd.endpoints[%d]", i), "%v", err)
		}
	}
	if !strings.HasPrefix(c.Etcd.Prefix, "/") || !strings.HasSuffix(c.Etcd.Prefix, "/") {
		v.add("etcd.prefix", "%q must start and end with '/'", c.Etcd.Prefix)
	}
	if v.positive("etcd.lease_ttl", c.Etcd.LeaseTTL) {
		if c.Etcd.LeaseTTL < 3*time.Second {
			v.add("etcd.lease_ttl", "must be at least 3s, got %s", c.Etcd.LeaseTTL)
		}
		if c.Etcd.LeaseTTL%time.Second != 0 {
			v.add("etcd.lease_ttl", "must be whole seconds (etcd leases are), got %s", c.Etcd.LeaseTTL)
		}
		if v.positive("etcd.trust_margin", c.Etcd.TrustMargin) && c.Etcd.LeaseTTL-c.Etcd.TrustMargin <= c.Etcd.LeaseTTL/3 {
			v.add("etcd.trust_margin", "%s leaves a trust window (lease_ttl − trust_margin = %s) no longer than the keep-alive period (lease_ttl/3 = %s)",
				c.Etcd.TrustMargin, c.Etcd.LeaseTTL-c.Etcd.TrustMargin, c.Etcd.LeaseTTL/3)
		}
	}
	v.positive("etcd.dial_timeout", c.Etcd.DialTimeout)

	// health
	if _, err := CronParser.Parse(c.Health.Schedule); err != nil {
		v.add("health.schedule", "%q: %v", c.Health.Schedule, err)
	}
	if v.positive("health.not_responding_after", c.Health.NotRespondingAfter) && hbOK &&
		c.Health.NotRespondingAfter < 3*c.Node.HeartbeatInterval {
		v.add("health.not_responding_after", "%s is less than 3 × node.heartbeat_interval (%s): one late heartbeat would condemn a live node",
			c.Health.NotRespondingAfter, 3*c.Node.HeartbeatInterval)
	}
	if v.positive("health.forget_after", c.Health.ForgetAfter) && c.Health.ForgetAfter <= c.Health.NotRespondingAfter {
		v.add("health.forget_after", "%s must be longer than health.not_responding_after (%s)", c.Health.ForgetAfter, c.Health.NotRespondingAfter)
	}
	if f := c.Health.MaxUnresponsiveFraction; f <= 0 || f > 1 {
		v.add("health.max_unresponsive_fraction", "must be in (0, 1], got %v", f)
	}

	// recovery
	if b := c.Recovery.BatchSize; b < 1 || b > 100000 {
		v.add("recovery.batch_size", "must be between 1 and 100000, got %d", b)
	}

	// api
	if _, _, err := net.SplitHostPort(c.API.Listen); err != nil {
		v.add("api.listen", "%q is not host:port: %v", c.API.Listen, err)
	}
	if c.API.Advertise != "" {
		if _, port, err := net.SplitHostPort(c.API.Advertise); err != nil || port == "0" {
			v.add("api.advertise", "%q is not a reachable host:port", c.API.Advertise)
		}
	}

	// log
	if !slices.Contains([]string{"auto", "text", "json"}, c.Log.Format) {
		v.add("log.format", "%q: want auto, text or json", c.Log.Format)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		v.add("log.level", "%q: want debug, info, warn or error", c.Log.Level)
	}

	// workflows
	names := map[string]int{}
	for i := range c.Workflows {
		w := &c.Workflows[i]
		p := fmt.Sprintf("workflows[%d]", i)
		if !safeName.MatchString(w.Name) {
			v.add(p+".name", "%q is not a safe name", w.Name)
		} else if j, dup := names[w.Name]; dup {
			v.add(p+".name", "%q is already the name of workflows[%d]", w.Name, j)
		} else {
			names[w.Name] = i
		}
		w.validate(v, p, c.Health)
	}
}

func (w *Workflow) validate(v *validator, p string, h Health) {
	checkTable(v, p+".table", w.Table)
	checkColumn(v, p+".id_column", w.IDColumn, true)
	checkColumn(v, p+".status_column", w.StatusColumn, true)
	checkColumn(v, p+".error_column", w.ErrorColumn, false)
	switch {
	case w.Claimable && w.Claims == nil:
		v.add(p+".claims", "required when claimable is true")
	case !w.Claimable && w.Claims != nil:
		v.add(p+".claims", "set, but claimable is false")
	case w.Claims != nil:
		cl := w.Claims
		checkTable(v, p+".claims.table", cl.Table)
		checkColumn(v, p+".claims.instance_column", cl.InstanceColumn, true)
		checkColumn(v, p+".claims.node_column", cl.NodeColumn, true)
		checkColumn(v, p+".claims.token_column", cl.TokenColumn, true)
		checkColumn(v, p+".claims.claimed_at_column", cl.ClaimedAtColumn, true)
		checkColumn(v, p+".claims.expires_at_column", cl.ExpiresAtColumn, true)
	}
	if len(w.Tasks) == 0 {
		v.add(p+".tasks", "at least one task is required")
	}
	taskNames := map[string]int{}
	interims := map[string]int{}
	for j := range w.Tasks {
		t := &w.Tasks[j]
		tp := fmt.Sprintf("%s.tasks[%d]", p, j)
		if !safeName.MatchString(t.Name) {
			v.add(tp+".name", "%q is not a safe name", t.Name)
		} else if k, dup := taskNames[t.Name]; dup {
			v.add(tp+".name", "%q is already the name of tasks[%d]", t.Name, k)
		} else {
			taskNames[t.Name] = j
		}
		t.validate(v, tp)
		if t.Interim != "" {
			if k, dup := interims[t.Interim]; dup {
				v.add(tp+".interim", "%q is already the interim state of tasks[%d]: a stuck instance must map to one task", t.Interim, k)
			} else {
				interims[t.Interim] = j
			}
		}
		if w.Claimable && v.positive(tp+".claim_timeout", t.ClaimTimeout) && t.ClaimTimeout < time.Second {
			v.add(tp+".claim_timeout", "must be at least 1s, got %s", t.ClaimTimeout)
		}
	}
}

func (t *Task) validate(v *validator, tp string) {
	states := map[string]string{} // state → key that named it
	state := func(key, s string) {
		if s == "" {
			v.add(tp+"."+key, "required")
			return
		}
		if prev, dup := states[s]; dup {
			v.add(tp+"."+key, "%q is the same state as %s", s, prev)
			return
		}
		states[s] = key
	}
	state("begin", t.Begin)
	state("interim", t.Interim)
	switch {
	case t.End != "" && len(t.Ends) > 0:
		v.add(tp+".ends", "set only one of end and ends")
	case t.End == "" && len(t.Ends) == 0:
		v.add(tp+".end", "required (or ends, for a branching task)")
	case t.End != "":
		state("end", t.End)
	default:
		for k, e := range t.Ends {
			state(fmt.Sprintf("ends[%d]", k), e)
		}
	}
	state("failed", t.Failed)
	t.OnInterrupt.validate(v, tp+".on_interrupt")
	t.OnFailure.validate(v, tp+".on_failure")
}

func (pol *Policy) validate(v *validator, p string) {
	if !slices.Contains([]string{StrategyNone, StrategyRetry, StrategyHold}, pol.Strategy) {
		v.add(p+".strategy", "%q: want none, retry or hold", pol.Strategy)
	}
	if pol.MaxAttempts < 1 {
		v.add(p+".max_attempts", "must be at least 1, got %d", pol.MaxAttempts)
	}
	for i, pat := range pol.NonRetryable {
		if _, err := regexp.Compile(pat); err != nil {
			v.add(fmt.Sprintf("%s.non_retryable[%d]", p, i), "%v", err)
		}
	}
	b := &pol.Backoff
	bp := p + ".backoff"
	kinds := []string{BackoffFixed, BackoffLinear, BackoffExponential, BackoffFibonacci, BackoffRandomizedExponential, BackoffSchedule}
	if !slices.Contains(kinds, b.Kind) {
		v.add(bp+".kind", "%q: want one of %s", b.Kind, strings.Join(kinds, ", "))
	}
	v.positive(bp+".base", b.Base)
	if v.positive(bp+".max_delay", b.MaxDelay) && b.MaxDelay < b.Base {
		v.add(bp+".max_delay", "%s is less than base (%s)", b.MaxDelay, b.Base)
	}
	if b.Jitter < 0 || b.Jitter >= 1 {
		v.add(bp+".jitter", "must be in [0, 1), got %v", b.Jitter)
	}
	if b.Kind == BackoffRandomizedExponential && b.Multiplier <= 1 {
		v.add(bp+".multiplier", "must be greater than 1, got %v", b.Multiplier)
	}
	if b.Kind != BackoffRandomizedExponential && b.Multiplier != 0 {
		v.add(bp+".multiplier", "only applies to kind randomized_exponential")
	}
	if b.Kind == BackoffSchedule && len(b.Schedule) == 0 {
		v.add(bp+".schedule", "required for kind schedule")
	}
	if b.Kind != BackoffSchedule && len(b.Schedule) > 0 {
		v.add(bp+".schedule", "only applies to kind schedule")
	}
	for i, d := range b.Schedule {
		v.positive(fmt.Sprintf("%s.schedule[%d]", bp, i), d)
	}
}

func checkTable(v *validator, path, table string) {
	if table == "" {
		v.add(path, "required")
		return
	}
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		v.add(path, "%q: want table or schema.table", table)
		return
	}
	for _, part := range parts {
		if !sqlIdent.MatchString(part) {
			v.add(path, "%q: %q is not a valid SQL identifier", table, part)
			return
		}
	}
}

func checkColumn(v *validator, path, col string, required bool) {
	switch {
	case col == "" && required:
		v.add(path, "required")
	case col != "" && !sqlIdent.MatchString(col):
		v.add(path, "%q is not a valid SQL identifier", col)
	}
}

func checkEndpoint(ep string) error {
	hostport := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return fmt.Errorf("%q: %v", ep, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "unix" && u.Scheme != "unixs" {
			return fmt.Errorf("%q: scheme %q not supported", ep, u.Scheme)
		}
		hostport = u.Host
	}
	if _, port, err := net.SplitHostPort(hostport); err != nil || port == "" {
		return fmt.Errorf("%q is not host:port", ep)
	}
	return nil
}

// checkDSN accepts a postgres:// URL or a key=value connection string.
func checkDSN(dsn string) error {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		_, err := url.Parse(dsn)
		if err != nil {
			return fmt.Errorf("not a valid URL")
		}
		return nil
	}
	if !strings.Contains(dsn, "=") {
		return fmt.Errorf("want a postgres:// URL or key=value pairs")
	}
	return nil
}

var kvPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// RedactedDSN returns the DSN with its password replaced, for logs.
func (d Database) RedactedDSN() string {
	return RedactDSN(d.DSN)
}

// RedactDSN replaces the password of a URL or key=value DSN.
func RedactDSN(dsn string) string {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "(unparsable DSN)"
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	return kvPassword.ReplaceAllString(dsn, "${1}xxxxx")
}

// NodeName returns node.name, or the hostname when it is empty.
func (c *Config) NodeName(hostname func() (string, error)) (string, error) {
	if c.Node.Name != "" {
		return c.Node.Name, nil
	}
	h, err := hostname()
	if err != nil {
		return "", fmt.Errorf("node.name: empty and the hostname is unknown: %w", err)
	}
	if !safeName.MatchString(h) {
		return "", fmt.Errorf("node.name: empty and the hostname %q is not a safe name; set node.name", h)
	}
	return h, nil
}

// Pool returns the connection-pool settings for an application name.
func (d Database) Pool(app string) pgdb.Config {
	return pgdb.Config{DSN: d.DSN, ApplicationName: app, StatementTimeout: d.StatementTimeout,
		ConnectTimeout: d.ConnectTimeout, MaxOpenConns: d.MaxOpenConns}
}
