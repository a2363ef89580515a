package configs

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/goccy/go-yaml/ast"
	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/infra/safefile"
	"github.com/enginehealth/enginehealth/internal/infra/tlsfiles"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

var (
	// safeName is a workflow or task name (node names follow
	// nodes.ValidName, the same rule): it appears in etcd keys, log
	// lines and URLs.
	safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	// sqlIdent is one part of a table or column name, always quoted when
	// used; the catalog check at start-up confirms it exists.
	sqlIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)
)

type validator struct {
	file     *ast.File
	problems []Problem
	warnings []Problem
	// bad holds key paths whose value could not be decoded; validation adds
	// nothing about them or below them.
	bad map[string]bool
	// dropped counts the problems beyond maxProblems, not listed.
	dropped int
	// files lists every file a key names, resolved (Config.Files).
	files []string
}

// maxProblems is how many problems a file reports at most: enough to fix
// a file in one go, and a hostile file cannot make the report (or the
// time to build it) huge.
const maxProblems = 100

func (v *validator) add(path, format string, args ...any) {
	if v.badPath(path) {
		return
	}
	if len(v.problems) >= maxProblems {
		v.dropped++
		return
	}
	v.addAt(path, v.lineNear(path), format, args...)
}

// lineNear is the line of the key at path or, when that key is not in the
// file (a required key that is missing, a default), of the nearest key
// above it that is.
func (v *validator) lineNear(path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if l := lineOf(v.file, p); l > 0 {
			return l
		}
	}
	return 0
}

// parentPath drops the last segment of a key path: "a.b[2]" → "a.b",
// "a.b" → "a".
func parentPath(p string) string {
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

func (v *validator) addAt(path string, line int, format string, args ...any) {
	if v.badPath(path) {
		return
	}
	if len(v.problems) >= maxProblems {
		v.dropped++
		return
	}
	v.problems = append(v.problems, Problem{Path: cmp.Or(path, docPath), Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) warn(path, format string, args ...any) {
	v.warnings = append(v.warnings, Problem{Path: path, Line: v.lineNear(path), Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) positive(path string, d time.Duration) bool {
	if d <= 0 {
		v.add(path, "must be a positive duration, got %s", d)
		return false
	}
	return true
}

// within checks that d is in [lo, hi] (lo 0: positive).
func (v *validator) within(path string, d, lo, hi time.Duration) bool {
	switch {
	case lo == 0 && d <= 0:
		v.add(path, "must be a positive duration, got %s", d)
	case lo > 0 && d < lo:
		v.add(path, "must be at least %s, got %s", lo, d)
	case d > hi:
		v.add(path, "must be at most %s, got %s", hi, d)
	default:
		return true
	}
	return false
}

// Bounds of values: below a floor a value would make the daemon spin or
// give up at once, beyond a ceiling it is a typo, not a choice. The key
// table (Keys, keys.go) documents each with the same constant, and
// TestDocumentedRanges loads a value just outside each.
const (
	minHeartbeatInterval  = 100 * time.Millisecond
	minShutdownTimeout    = time.Second
	minStatementTimeout   = time.Second
	minConnectTimeout     = 100 * time.Millisecond
	minDialTimeout        = 100 * time.Millisecond
	minAutoSyncInterval   = time.Second
	minSweepInterval      = time.Second
	minClaimTimeout       = time.Second
	minGradePeriod        = time.Second
	minSessionTTL         = time.Second
	maxSessionTTL         = 7 * 24 * time.Hour
	minBackoffDelay       = time.Millisecond
	minOpenConns          = 2
	minBatchSize          = 1
	maxBatchSize          = 100000
	maxHeartbeatInterval  = time.Minute
	maxShutdownTimeout    = 10 * time.Minute
	maxStatementTimeout   = time.Hour
	maxConnectTimeout     = 5 * time.Minute
	minLeaseTTL           = leader.MinLeaseTTL
	maxLeaseTTL           = 10 * time.Minute
	maxDialTimeout        = 5 * time.Minute
	maxAutoSyncInterval   = 24 * time.Hour
	maxNotRespondingAfter = 24 * time.Hour
	maxForgetAfter        = 365 * 24 * time.Hour
	maxSweepInterval      = 24 * time.Hour
	maxClaimTimeout       = 24 * time.Hour
	maxBackoffDelay       = 30 * 24 * time.Hour
	maxGradePeriod        = 30 * 24 * time.Hour
	maxMultiplier         = 100
	maxAttempts           = 1000
	maxOpenConns          = 1000
	maxStateLen           = 255
)

func (c *Config) validate(v *validator) {
	// node
	if c.Node.Name != "" && nodes.ValidName(c.Node.Name) != nil {
		v.add("node.name", "%s is not a safe name (letters, digits, '.', '_', '-'; at most 63; starts with a letter or digit)", excerpt(c.Node.Name))
	}
	hbOK := v.within("node.heartbeat_interval", c.Node.HeartbeatInterval, minHeartbeatInterval, maxHeartbeatInterval)
	v.within("node.shutdown_timeout", c.Node.ShutdownTimeout, minShutdownTimeout, maxShutdownTimeout)
	if o := c.Node.OnUnexpectedShutdown; !slices.Contains(unexpectedShutdowns, o) {
		v.add("node.on_unexpected_shutdown", "%s: want ack or recover", excerpt(o))
	}
	switch d := c.Node.StateDirectory; {
	case c.Node.StateDir != "" && !filepath.IsAbs(c.Node.StateDir):
		v.add("node.state_dir", "%s is not an absolute path", excerpt(c.Node.StateDir))
	case c.Node.StateDir == "" && d != "" && !filepath.IsAbs(d):
		v.add("node.state_dir", "empty, and $STATE_DIRECTORY %s is not an absolute path", excerpt(d))
	}

	// database
	switch schema := c.Database.Schema; {
	case !sqlIdent.MatchString(schema):
		v.add("database.schema", "%s is not a valid SQL identifier", excerpt(schema))
	case strings.HasPrefix(strings.ToLower(schema), "pg_") || strings.EqualFold(schema, "information_schema"):
		v.add("database.schema", "%s is a PostgreSQL system schema: the sidecar needs a schema of its own", excerpt(schema))
	}
	v.within("database.statement_timeout", c.Database.StatementTimeout, minStatementTimeout, maxStatementTimeout)
	v.within("database.connect_timeout", c.Database.ConnectTimeout, minConnectTimeout, maxConnectTimeout)
	if n := c.Database.MaxOpenConns; n < minOpenConns || n > maxOpenConns {
		v.add("database.max_open_conns", "must be between %d and %d, got %d", minOpenConns, maxOpenConns, n)
	}
	if c.Database.DSN != "" {
		if err := checkDSN(c.Database.DSN); err != nil {
			v.add("database", "the DSN is malformed: %v", err)
		} else if err := checkDSNFiles(c.Database.DSN); err != nil {
			v.add("database", "the DSN's %v", err)
		}
	}

	// etcd
	if len(c.Etcd.Endpoints) == 0 {
		v.add("etcd.endpoints", "at least one endpoint is required")
	}
	keys := make([]string, len(c.Etcd.Endpoints))
	for i, ep := range c.Etcd.Endpoints {
		if err := checkEndpoint(ep); err != nil {
			v.add(fmt.Sprintf("etcd.endpoints[%d]", i), "%v", err)
			continue
		}
		keys[i] = endpointKey(ep)
		if j := slices.Index(keys, keys[i]); j < i {
			if c.Etcd.Endpoints[j] == ep {
				v.add(fmt.Sprintf("etcd.endpoints[%d]", i), "the same as etcd.endpoints[%d]", j)
			} else {
				v.add(fmt.Sprintf("etcd.endpoints[%d]", i), "%s is the same member as etcd.endpoints[%d], %s, written another way",
					excerpt(redact(ep)), j, excerpt(redact(c.Etcd.Endpoints[j])))
			}
		}
	}
	if len(c.Etcd.Endpoints) == 1 {
		v.warn("etcd.endpoints", "one endpoint: if that member fails the lease is lost; list every member of the etcd cluster")
	}
	c.Etcd.validateAccess(v)
	if !strings.HasPrefix(c.Etcd.Prefix, "/") || !strings.HasSuffix(c.Etcd.Prefix, "/") {
		v.add("etcd.prefix", "%s must start and end with '/'", excerpt(c.Etcd.Prefix))
	}
	if v.within("etcd.lease_ttl", c.Etcd.LeaseTTL, minLeaseTTL, maxLeaseTTL) {
		ttl, margin := c.Etcd.LeaseTTL, c.Etcd.TrustMargin
		if ttl%time.Second != 0 {
			v.add("etcd.lease_ttl", "must be whole seconds (etcd leases are), got %s", ttl)
		}
		if v.positive("etcd.trust_margin", margin) {
			window := ttl - margin
			switch {
			case window <= ttl/3:
				v.add("etcd.trust_margin", "%s leaves a trust window (lease_ttl − trust_margin = %s) no longer than lease_ttl/3 (%s): it must outlast a few keep-alive rounds",
					margin, window, ttl/3)
			case window <= time.Second+ttl/3:
				v.warn("etcd.trust_margin", "the trust window (lease_ttl − trust_margin = %s) is not longer than one etcd leader election (1s) plus lease_ttl/3 (%s): losing the etcd leader suspends the master and may move it; see docs/design.md, The master",
					window, ttl/3)
			}
		}
	}
	v.within("etcd.dial_timeout", c.Etcd.DialTimeout, minDialTimeout, maxDialTimeout)
	if d := c.Etcd.AutoSyncInterval; d != nil && *d != 0 && (*d < minAutoSyncInterval || *d > maxAutoSyncInterval) {
		v.add("etcd.auto_sync_interval", "must be 0 (off) or in [%s, %s], got %s", minAutoSyncInterval, maxAutoSyncInterval, *d)
	}

	// health
	if sched, err := health.ParseSchedule(c.Health.Schedule); err != nil {
		v.add("health.schedule", "%s: %v", excerpt(c.Health.Schedule), err)
	} else {
		c.Health.ParsedSchedule = sched
	}
	if v.within("health.not_responding_after", c.Health.NotRespondingAfter, 0, maxNotRespondingAfter) && hbOK &&
		c.Health.NotRespondingAfter < nodes.LiveBeats*c.Node.HeartbeatInterval {
		v.add("health.not_responding_after", "%s is less than %d × node.heartbeat_interval (%s): one late heartbeat would condemn a live node",
			c.Health.NotRespondingAfter, nodes.LiveBeats, nodes.LiveBeats*c.Node.HeartbeatInterval)
	}
	if v.within("health.forget_after", c.Health.ForgetAfter, 0, maxForgetAfter) && c.Health.ForgetAfter <= c.Health.NotRespondingAfter {
		v.add("health.forget_after", "%s must be longer than health.not_responding_after (%s)", c.Health.ForgetAfter, c.Health.NotRespondingAfter)
	}
	if f := c.Health.MaxUnresponsiveFraction; !(f > 0 && f <= 1) {
		v.add("health.max_unresponsive_fraction", "must be in (0, 1], got %v", f)
	}
	// A sweep is part of a pass: it cannot come more often than passes.
	// A schedule longer than a day (@weekly) sweeps with every pass: its
	// period is the longest interval allowed then.
	if sweep, period := c.Health.SweepInterval, c.Health.ParsedSchedule.Period(); v.within("health.sweep_interval", sweep, minSweepInterval, max(maxSweepInterval, period)) &&
		period > 0 && sweep < period {
		v.add("health.sweep_interval", "%s is shorter than one period of health.schedule (%s): a sweep runs with a pass, so at most once a period",
			sweep, period)
	}

	// recovery
	if b := c.Recovery.BatchSize; b < minBatchSize || b > maxBatchSize {
		v.add("recovery.batch_size", "must be between %d and %d, got %d", minBatchSize, maxBatchSize, b)
	}

	// failover
	v.within("failover.window", c.Failover.Window, minGradePeriod, maxGradePeriod)
	v.within("api.session_ttl", c.API.SessionTTL, minSessionTTL, maxSessionTTL)
	v.within("failover.quiet_period", c.Failover.QuietPeriod, minGradePeriod, maxGradePeriod)
	if f := *c.Failover.MaxErrorFraction; !(f >= 0 && f <= 1) {
		v.add("failover.max_error_fraction", "must be in [0, 1], got %v", f)
	}

	// api
	if t := c.API.Token; t != "" {
		key := "api.token_env"
		if c.API.TokenFile != "" {
			key = "api.token_file"
		}
		if p := TokenProblem(t); p != "" {
			v.add(key, "%s", p)
		} else if len(t) < 16 {
			v.warn(key, "the token has %d characters: use at least 16 random ones (e.g. openssl rand -hex 32)", len(t))
		}
	}
	if a := c.API; a.AuthReads && a.TokensFile == "" && a.TokenFile == "" && a.TokenEnv == "" {
		v.add("api.auth_reads", "true needs operators to read with: set api.tokens_file (or api.token_file or api.token_env)")
	}
	if ops := c.API.Operators; len(ops) > 0 && !slices.ContainsFunc(ops, func(o Operator) bool { return o.Role == RoleOperate }) {
		v.warn("api.tokens_file", "no operator has role %s: every mutation (ack, check, recover, pause, holds, retry) is refused", RoleOperate)
	}
	if err := checkHostPort(c.API.Listen, 0); err != nil {
		v.add("api.listen", "%v", err)
	} else if h, _, _ := net.SplitHostPort(c.API.Listen); c.API.Advertise == "" && (h == "" || isUnspecified(h)) {
		// The advertised address defaults to the bound one: other nodes
		// would dial [::]:port, their own host, to forward to this one.
		v.add("api.advertise", "required when api.listen (%s) binds every address: the address other nodes and the CLI reach this node at, e.g. 10.0.0.5:%s",
			excerpt(c.API.Listen), portOf(c.API.Listen))
	}
	if adv := c.API.Advertise; adv != "" {
		if scheme, rest, ok := strings.Cut(adv, "://"); ok {
			switch {
			case scheme == "https" && c.API.TLS == nil:
				v.add("api.advertise", "%s: https, but this node serves plain HTTP: set api.tls or write host:port", excerpt(adv))
			case scheme == "http" && c.API.TLS != nil:
				v.add("api.advertise", "%s: http, but api.tls serves HTTPS: write https:// or leave the scheme out", excerpt(adv))
			case scheme != "http" && scheme != "https":
				v.add("api.advertise", "%s: want host:port, http://host:port or https://host:port", excerpt(adv))
			}
			adv = rest
		}
		if err := checkHostPort(adv, 1); err != nil {
			v.add("api.advertise", "%v (the address other nodes and the CLI reach this node at)", err)
		} else if h, _, _ := net.SplitHostPort(adv); isUnspecified(h) {
			v.add("api.advertise", "%s is no address another node can reach: name this host", excerpt(adv))
		}
	}

	// log
	if !slices.Contains(logFormats, c.Log.Format) {
		v.add("log.format", "%s: want auto, text or json", excerpt(c.Log.Format))
	}
	if !slices.Contains(logLevels, c.Log.Level) {
		v.add("log.level", "%s: want debug, info, warn or error", excerpt(c.Log.Level))
	}

	// workflows
	names := map[string]int{}
	tables := map[string]int{}
	for i := range c.Workflows {
		w := &c.Workflows[i]
		p := fmt.Sprintf("workflows[%d]", i)
		if !safeName.MatchString(w.Name) {
			v.add(p+".name", "%s is not a safe name", excerpt(w.Name))
		} else if j, dup := names[w.Name]; dup {
			v.add(p+".name", "%s is already the name of workflows[%d]", excerpt(w.Name), j)
		} else {
			names[w.Name] = i
		}
		if w.Table != "" && w.StatusColumn != "" {
			key := strings.TrimPrefix(w.Table, "public.") + "\x00" + w.StatusColumn
			if j, dup := tables[key]; dup {
				v.add(p+".table", "%s (status column %s) is already the table of workflows[%d]: one workflow per table and status column, with all its tasks",
					excerpt(w.Table), excerpt(w.StatusColumn), j)
			} else {
				tables[key] = i
			}
		}
		w.validate(v, p)
	}
}

func (w *Workflow) validate(v *validator, p string) {
	checkTable(v, p+".table", w.Table)
	checkColumn(v, p+".id_column", w.IDColumn, true)
	checkColumn(v, p+".status_column", w.StatusColumn, true)
	checkColumn(v, p+".error_column", w.ErrorColumn, false)
	checkColumn(v, p+".updated_column", w.UpdatedColumn, false)
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
		if w.Claimable {
			v.within(tp+".claim_timeout", t.ClaimTimeout, minClaimTimeout, maxClaimTimeout)
		}
		for _, pol := range []struct {
			key string
			p   *Policy
		}{{"on_interrupt", t.OnInterrupt}, {"on_failure", t.OnFailure}} {
			if pol.p != nil && len(pol.p.NonRetryable) > 0 && w.ErrorColumn == "" {
				v.add(tp+"."+pol.key+".non_retryable", "needs the workflow's error_column (%s.error_column): the patterns are matched against it", p)
			}
		}
		if t.OnFailure != nil && t.OnFailure.Strategy != recovery.StrategyNone && w.UpdatedColumn == "" {
			v.add(tp+".on_failure", "needs the workflow's updated_column (%s.updated_column, a timestamp the engine sets on every state change): new failures are found by it, never by scanning old ones", p)
		}
		// A state another task runs in: an instance waiting to begin this
		// task there, or done with it there, would be taken for an
		// interrupted run of the other task and repaired.
		named := []struct{ key, state string }{{"begin", t.Begin}, {"end", t.End}, {"failed", t.Failed}}
		for k, e := range t.Ends {
			named = append(named, struct{ key, state string }{fmt.Sprintf("ends[%d]", k), e})
		}
		for _, n := range named {
			if k, in := slices.IndexFunc(w.Tasks, func(o Task) bool { return o.Interim == n.state }), n.state != ""; in && k >= 0 && k != j {
				v.add(tp+"."+n.key, "%q is the interim state of tasks[%d] (%s): an instance in it would be taken for an interrupted run of that task", n.state, k, w.Tasks[k].Name)
			}
		}
		if t.OnFailure != nil && t.OnFailure.Strategy != recovery.StrategyNone {
			for k := range w.Tasks {
				if k != j && w.Tasks[k].Failed == t.Failed {
					v.add(tp+".on_failure", "failed state %q is also the failed state of tasks[%d] (%s): an instance in it cannot be told to belong to this task; give the task a failed state of its own", t.Failed, k, w.Tasks[k].Name)
					break
				}
			}
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
		if err := checkState(s); err != nil {
			v.add(tp+"."+key, "%s: %v", excerpt(s), err)
			return
		}
		if prev, dup := states[s]; dup {
			v.add(tp+"."+key, "%s is the same state as %s", excerpt(s), prev)
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
	if t.OnInterrupt != nil {
		t.OnInterrupt.validate(v, tp+".on_interrupt")
	}
	if t.OnFailure != nil {
		t.OnFailure.validate(v, tp+".on_failure")
	}
}

func (pol *Policy) validate(v *validator, p string) {
	if !pol.Strategy.Valid() {
		v.add(p+".strategy", "%s: want none, retry or hold", excerpt(string(pol.Strategy)))
	}
	if pol.MaxAttempts < 1 || pol.MaxAttempts > maxAttempts {
		v.add(p+".max_attempts", "must be between 1 and %d, got %d", maxAttempts, pol.MaxAttempts)
	}
	for i, pat := range pol.NonRetryable {
		if pat == "" {
			// It matches every error text: every instance with one would
			// fail at once. Say so if that is meant.
			v.add(fmt.Sprintf("%s.non_retryable[%d]", p, i), "an empty pattern matches every error text; write '.' to fail every instance that has one")
			continue
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			why := "invalid"
			if re, ok := err.(*syntax.Error); ok {
				why = string(re.Code)
			}
			v.add(fmt.Sprintf("%s.non_retryable[%d]", p, i), "%s is not a regular expression: %s", excerpt(pat), why)
			continue
		}
		// PostgreSQL matches the patterns: one whose escapes mean
		// something else there (and cannot be rewritten) is refused here,
		// not found out when an instance's error fails to match.
		if _, err := recovery.PGPattern(pat); err != nil {
			v.add(fmt.Sprintf("%s.non_retryable[%d]", p, i), "%s: %v", excerpt(pat), err)
			continue
		}
		// A pattern that matches the empty text and a text of another
		// kind (x*, ^, |, ()) matches anywhere in every error text: most
		// likely a slip that would fail every instance with one.
		if re.MatchString("") && re.MatchString("connection reset by peer") {
			v.add(fmt.Sprintf("%s.non_retryable[%d]", p, i), "%s matches every error text; write '.' to fail every instance that has one", excerpt(pat))
		}
	}
	b := &pol.Backoff
	bp := p + ".backoff"
	if !b.Kind.Valid() {
		v.add(bp+".kind", "%s: want one of %s", excerpt(string(b.Kind)), strings.Join(backoffKinds, ", "))
	}
	// Delays are kept, compared and said to the millisecond: a finer
	// one would be a retry "in 0s" that still waits for a pass.
	if d := *b.Base; d < 0 || d > maxBackoffDelay {
		v.add(bp+".base", "must be in [0s, %s], got %s", maxBackoffDelay, d)
	} else if d > 0 && d < minBackoffDelay {
		v.add(bp+".base", "%s is below %s, the finest delay kept; write 0s for a retry at once", d, minBackoffDelay)
	}
	if v.within(bp+".max_delay", b.MaxDelay, minBackoffDelay, maxBackoffDelay) && b.MaxDelay < *b.Base {
		v.add(bp+".max_delay", "%s is less than base (%s)", b.MaxDelay, *b.Base)
	}
	if j := *b.Jitter; !(j >= 0 && j < 1) {
		v.add(bp+".jitter", "must be in [0, 1), got %v", j)
	}
	exp := b.Kind == recovery.BackoffExponential || b.Kind == recovery.BackoffRandomizedExponential
	if exp && !(b.Multiplier > 1 && b.Multiplier <= maxMultiplier) {
		v.add(bp+".multiplier", "must be greater than 1 and at most %v, got %v", maxMultiplier, b.Multiplier)
	}
	if !exp && b.Multiplier != 0 {
		v.add(bp+".multiplier", "only applies to kinds exponential and randomized_exponential")
	}
	if b.Kind == recovery.BackoffSchedule && len(b.Schedule) > 0 && pol.MaxAttempts > len(b.Schedule) {
		v.add(p+".max_attempts", "%d is more than the %d delays of backoff.schedule: past its end there is no retry", pol.MaxAttempts, len(b.Schedule))
	}
	if b.Kind == recovery.BackoffSchedule && len(b.Schedule) == 0 {
		v.add(bp+".schedule", "required for kind schedule")
	}
	if b.Kind != recovery.BackoffSchedule && len(b.Schedule) > 0 {
		v.add(bp+".schedule", "only applies to kind schedule")
	}
	for i, d := range b.Schedule {
		if v.within(fmt.Sprintf("%s.schedule[%d]", bp, i), d, minBackoffDelay, maxBackoffDelay) && d > b.MaxDelay {
			// The cap would cut it short without a word.
			v.add(fmt.Sprintf("%s.schedule[%d]", bp, i), "%s is more than max_delay (%s), which caps every delay: raise max_delay or lower the entry", d, b.MaxDelay)
		}
	}
}

func checkTable(v *validator, path, table string) {
	if table == "" {
		v.add(path, "required")
		return
	}
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		v.add(path, "%s: want table or schema.table", excerpt(table))
		return
	}
	for _, part := range parts {
		if !sqlIdent.MatchString(part) {
			v.add(path, "%s: %s is not a valid SQL identifier", excerpt(table), excerpt(part))
			return
		}
	}
}

func checkColumn(v *validator, path, col string, required bool) {
	switch {
	case col == "" && required:
		v.add(path, "required")
	case col != "" && !sqlIdent.MatchString(col):
		v.add(path, "%s is not a valid SQL identifier", excerpt(col))
	}
}

// checkState checks that a state name is printable text of at most 255
// bytes.
func checkState(s string) error {
	switch {
	case len(s) > maxStateLen:
		return fmt.Errorf("longer than %d bytes", maxStateLen)
	case strings.TrimSpace(s) != s:
		return fmt.Errorf("leading or trailing white space")
	case strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }):
		return fmt.Errorf("not printable")
	}
	return nil
}

// checkHostPort checks host:port with a numeric port from minPort to
// 65535; no scheme, path or user.
func checkHostPort(addr string, minPort int) error {
	if strings.ContainsAny(addr, "/@?#") || strings.Contains(addr, "://") {
		return fmt.Errorf("%s: want host:port, without scheme, user or path", excerpt(addr))
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s is not host:port", excerpt(addr))
	}
	n, err := portNumber(port)
	if err != nil || n < minPort || n > 65535 {
		return fmt.Errorf("%s: port %s is not a number from %d to 65535", excerpt(addr), excerpt(port), minPort)
	}
	if minPort > 0 && host == "" {
		return fmt.Errorf("%s: a host is required", excerpt(addr))
	}
	if host != "" {
		if err := checkHost(host); err != nil {
			return fmt.Errorf("%s: %v", excerpt(addr), err)
		}
	}
	return nil
}

// TokenProblem says what makes t no API token ("" when it is one): it
// travels in an Authorization header, so it is visible ASCII of at most
// 1,024 characters. The text never quotes the token.
func TokenProblem(t string) string {
	if i := strings.IndexFunc(t, func(r rune) bool { return r < 0x21 || r > 0x7e }); i >= 0 {
		return fmt.Sprintf("the token may hold only visible ASCII characters (it travels in an Authorization header); byte %d is not one", i)
	}
	if len(t) > maxToken {
		return fmt.Sprintf("the token has %d characters, more than %d (it must fit in a request header)", len(t), maxToken)
	}
	return ""
}

// portOf is the port of a valid host:port.
func portOf(hostport string) string {
	_, port, _ := net.SplitHostPort(hostport)
	return port
}

func isUnspecified(host string) bool {
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsUnspecified()
}

// portNumber reads a port written in decimal digits only ("+80" and " 80"
// are not ports).
func portNumber(port string) (int, error) {
	if port == "" || strings.Trim(port, "0123456789") != "" || len(port) > 5 {
		return 0, errors.New("not a port number")
	}
	return strconv.Atoi(port)
}

// maxToken bounds the API token: it travels in every mutation's
// Authorization header, which the server caps at 16 KiB.
const maxToken = 1024

// hostLabel is one label of a DNS name (RFC 1123).
var hostLabel = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// checkHost accepts an IP address or a DNS name; a name made of digits
// and dots only must be an IP address (999.1.1.1 is neither).
func checkHost(host string) error {
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	name := strings.TrimSuffix(host, ".")
	if len(name) > 253 || name == "" {
		return fmt.Errorf("host %s is not an IP address or a DNS name", excerpt(host))
	}
	numeric := true
	for _, l := range strings.Split(name, ".") {
		if !hostLabel.MatchString(l) {
			return fmt.Errorf("host %s is not an IP address or a DNS name", excerpt(host))
		}
		if strings.Trim(l, "0123456789") != "" {
			numeric = false
		}
	}
	if numeric {
		return fmt.Errorf("host %s is not a valid IP address", excerpt(host))
	}
	return nil
}

func checkEndpoint(ep string) error {
	hostport := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return fmt.Errorf("%s is not a URL", excerpt(ep))
		}
		if u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "unix" && u.Scheme != "unixs" {
			return fmt.Errorf("%s: scheme %s not supported", excerpt(ep), excerpt(u.Scheme))
		}
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
			return fmt.Errorf("%s: want scheme://host:port, without a path", excerpt(ep))
		}
		hostport = u.Host
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || port == "" {
		return fmt.Errorf("%s is not host:port", excerpt(ep))
	}
	if n, err := portNumber(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%s: port %s is not a number from 1 to 65535", excerpt(ep), excerpt(port))
	}
	if host == "" {
		return fmt.Errorf("%s: a host is required", excerpt(ep))
	}
	if err := checkHost(host); err != nil {
		return fmt.Errorf("%s: %v", excerpt(ep), err)
	}
	return nil
}

// endpointKey is a valid endpoint as the client dials it, to tell two
// spellings of one member: host:port and http(s)://host:port (the scheme
// only says whether TLS is used, which etcd.tls decides for all), a host
// in any letter case, a port with leading zeros.
func endpointKey(ep string) string {
	hostport := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil || u.Scheme == "unix" || u.Scheme == "unixs" {
			return ep
		}
		hostport = u.Host
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return ep
	}
	n, err := portNumber(port)
	if err != nil {
		return ep
	}
	return net.JoinHostPort(strings.ToLower(host), strconv.Itoa(n))
}

// redact masks what may be a credential in a value quoted in an error:
// the userinfo of anything with an '@' (an etcd endpoint, a URL), and the
// value of password= (a key=value DSN).
func redact(s string) string {
	return kvPassword.ReplaceAllString(redactURL(s), "${1}xxxxx")
}

// redactURL hides the password of a URL's userinfo.
func redactURL(s string) string {
	if strings.LastIndex(s, "@") <= 0 {
		return s // no userinfo before an '@' ("@every 5s")
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		// Not a URL we can read: hide whatever precedes the last '@'.
		return "xxxxx@" + s[strings.LastIndex(s, "@")+1:]
	}
	return u.Redacted()
}

// RedactedEndpoints returns the etcd endpoints with passwords hidden, for
// logs and output.
func (e Etcd) RedactedEndpoints() []string {
	out := make([]string, len(e.Endpoints))
	for i, ep := range e.Endpoints {
		out[i] = redactURL(ep)
	}
	return out
}

// validateAccess checks how the client reaches and authenticates to
// etcd: TLS and the endpoints' schemes, one source of credentials, and
// says when a password sits in the file or travels unencrypted.
func (e Etcd) validateAccess(v *validator) {
	inURL := -1 // the first endpoint with user:password@
	plain := false
	for i, ep := range e.Endpoints {
		scheme, _, hasScheme := strings.Cut(ep, "://")
		if hasScheme && inURL < 0 && strings.Contains(ep, "@") {
			if u, err := url.Parse(ep); err == nil && u.User != nil {
				inURL = i
			}
		}
		if scheme = strings.ToLower(scheme); hasScheme && (scheme == "https" || scheme == "unixs") {
			continue
		}
		plain = plain || e.TLS == nil
		if e.TLS != nil && hasScheme {
			v.add(fmt.Sprintf("etcd.endpoints[%d]", i), "%s is %s://, without TLS, but etcd.tls is set: write https://host:port or host:port", excerpt(ep), scheme)
		}
	}
	if inURL >= 0 {
		key := fmt.Sprintf("etcd.endpoints[%d]", inURL)
		if e.Username != "" {
			v.add(key, "carries user:password@, and etcd.username is set too: give the credentials once, as etcd.username with etcd.password_file or etcd.password_env")
		} else {
			v.warn(key, "user:password@ puts a secret in the configuration file: use etcd.username with etcd.password_file or etcd.password_env")
		}
	}
	if e.TLS != nil && e.TLS.ServerName != "" {
		if err := checkHost(e.TLS.ServerName); err != nil {
			v.add("etcd.tls.server_name", "%v", err)
		}
	}
	if plain && (e.Username != "" || inURL >= 0) {
		key := "etcd.username"
		if e.Username == "" {
			key = fmt.Sprintf("etcd.endpoints[%d]", inURL)
		}
		v.warn(key, "the etcd password travels unencrypted: set etcd.tls (etcd serving clients with --cert-file and --key-file)")
	}
}

// ClientEndpoints returns the endpoints for the etcd client, with the user
// and password to authenticate as: etcd.username's, or the first found in
// an endpoint's userinfo, which is taken out of the endpoints. With
// etcd.tls, an endpoint without a scheme is https.
func (e Etcd) ClientEndpoints() (eps []string, user, password string) {
	user, password = e.Username, e.Password
	for _, ep := range e.Endpoints {
		if !strings.Contains(ep, "://") && e.TLS != nil {
			ep = "https://" + ep
		}
		u, err := url.Parse(ep)
		if err != nil || u.User == nil || !strings.Contains(ep, "://") {
			eps = append(eps, ep)
			continue
		}
		if user == "" {
			user = u.User.Username()
			password, _ = u.User.Password()
		}
		u.User = nil
		eps = append(eps, u.String())
	}
	return eps, user, password
}

// checkDSN accepts what the driver accepts: a postgres:// URL or a
// key=value connection string, with known keys and values it can use
// (sslmode, connect_timeout...). The driver's message is shown with the
// DSN's password masked.
func checkDSN(dsn string) error {
	if !strings.Contains(dsn, "=") && !strings.Contains(dsn, "://") {
		return errors.New("want a postgres:// URL or key=value pairs")
	}
	if strings.Contains(dsn, "://") && !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return errors.New("want a postgres:// or postgresql:// URL")
	}
	if strings.Contains(dsn, "://") {
		// The URL parser's message quotes the URL up to where it failed,
		// which may be part of a password: say what is wrong instead.
		u, err := url.Parse(dsn)
		if err != nil {
			return errors.New("not a valid URL (in a password, reserved characters such as # / ? @ : must be percent-encoded)")
		}
		if strings.Contains(u.Host, ",") {
			// The driver takes "a:1,b:2" for one host name.
			return errors.New("a postgres:// URL names one host; for several (a host list, tried in turn), use key=value pairs: host=a,b port=5432,5433")
		}
	}
	c, err := pq.NewConfig(dsn)
	if err == nil {
		switch c.TargetSessionAttrs {
		case pq.TargetSessionAttrsReadOnly, pq.TargetSessionAttrsStandby, pq.TargetSessionAttrsPreferStandby:
			return fmt.Errorf("target_session_attrs=%s: the sidecar writes; use read-write (the default) or primary", c.TargetSessionAttrs)
		}
	}
	if err != nil {
		// The driver's message on the DSN with its password masked (it
		// cannot quote what is not there; masking the password's text in
		// the message instead garbled it: every "p" of "port" for the
		// password "p"). If that DSN is fine, the password is at fault.
		if _, rerr := pq.NewConfig(RedactDSN(dsn)); rerr != nil {
			// Whole enough to say why (no password is in it).
			return errors.New(excerptN(strings.TrimPrefix(rerr.Error(), "pq: "), 200))
		}
		return errors.New("the password cannot be read (in a key=value DSN, quote it: password='...', with \\' and \\\\ inside)")
	}
	return nil
}

// checkDSNFiles reads the TLS files a DSN names, as the driver will at
// every connection: the root CA must hold a PEM certificate, the client
// certificate and key must be readable and match. Messages name the DSN
// parameter and the file, never the file's content.
func checkDSNFiles(dsn string) error {
	c, err := pq.NewConfig(dsn)
	if err != nil || c.SSLInline || c.SSLMode == pq.SSLModeDisable {
		return nil
	}
	// Read as any file a configuration names (never a FIFO or a device,
	// never more than a PEM file's limit).
	read := func(param, file string) ([]byte, error) {
		b, err := safefile.Read(file, tlsfiles.MaxFileBytes)
		var e *safefile.Error
		switch {
		case errors.As(err, &e):
			return nil, fmt.Errorf("%s %s: %w", param, file, err)
		case err != nil:
			return nil, fmt.Errorf("%s: %w", param, err)
		}
		return b, nil
	}
	if root := c.SSLRootCert; root != "" && root != "system" {
		b, err := read("sslrootcert", root)
		if err != nil {
			return err
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return fmt.Errorf("sslrootcert %s: no PEM certificate in the file", root)
		}
	}
	switch {
	case c.SSLCert != "" && c.SSLKey != "":
		cert, err := read("sslcert", c.SSLCert)
		if err != nil {
			return err
		}
		key, err := read("sslkey", c.SSLKey)
		if err != nil {
			return err
		}
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			return fmt.Errorf("sslcert %s and sslkey %s: %w", c.SSLCert, c.SSLKey, err)
		}
	case c.SSLCert != "":
		return fmt.Errorf("sslcert %s without sslkey", c.SSLCert)
	case c.SSLKey != "":
		return fmt.Errorf("sslkey %s without sslcert", c.SSLKey)
	}
	return nil
}

var kvPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// RedactedDSN returns the DSN with its password replaced, for logs.
func (d Database) RedactedDSN() string {
	return RedactDSN(d.DSN)
}

// Where names the server of the DSN for messages: "host H port P" and the
// DSN without its password.
func (d Database) Where() string {
	c, err := pq.NewConfig(d.DSN)
	if err != nil {
		return d.RedactedDSN()
	}
	return fmt.Sprintf("host %s port %d (%s)", c.Host, c.Port, d.RedactedDSN())
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
	if nodes.ValidName(h) != nil {
		return "", fmt.Errorf("node.name: empty and the hostname %q is not a safe name; set node.name", h)
	}
	return h, nil
}

// Pool returns the connection-pool settings for an application name.
func (d Database) Pool(app string) pgdb.Config {
	return pgdb.Config{DSN: d.DSN, ApplicationName: app, StatementTimeout: d.StatementTimeout,
		ConnectTimeout: d.ConnectTimeout, MaxOpenConns: d.MaxOpenConns}
}
