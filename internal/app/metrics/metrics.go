// Package metrics is the daemon's Prometheus surface (GET /metrics): the
// counters its loops feed (check passes, repairs, grade changes, API
// requests) and the gauges read at scrape time from the node registry and
// the daemon's own state, with client_golang's process and Go collectors.
// Labels are configured names (workflow, task, node, route), never
// instance ids.
package metrics

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/infra/certexpiry"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

const ns = "enginehealth"

// Source is what a scrape reads now. Nil functions are left out.
type Source struct {
	// Nodes lists the node records (the API's database pool).
	Nodes func(ctx context.Context) ([]nodes.Node, error)
	// HoldsOpen counts the instances held for an operator, and how long
	// the oldest has waited.
	HoldsOpen func(ctx context.Context) (int64, time.Duration, error)
	// Period of the check schedule (alerts compare the last success with
	// it); 0: not exported.
	Period time.Duration
	// Status and Grade of this node, as its last heartbeat saw them.
	Status func() nodes.Status
	Grade  func() string
	// Master reports whether this node acts as master, and its term.
	Master func() (acting bool, term int64)
	// Passes returns this node's check-pass statistics; Disrupted, whether its
	// last pass was in disruption mode.
	Passes    func() health.PassStats
	Disrupted func() bool
	// Paused reads the cluster's pause switch, and since when it is
	// paused.
	Paused func(ctx context.Context) (bool, time.Time, error)
	// EventsWritten reads the id of the newest event (events ever
	// written, cluster-wide).
	EventsWritten func(ctx context.Context) (int64, error)
	// Timeout of the scrape's database reads; default 2 s.
	Timeout time.Duration
	// Tasks lists the configured workflow tasks, whose repair counters are
	// exported from the start (at 0).
	Tasks []Task
	// Certificates returns when this node's certificate files expire
	// (certexpiry.Watch.Expiries).
	Certificates func() []certexpiry.Expiry
	// EtcdReachable reports whether this node's last check of etcd succeeded.
	EtcdReachable func() bool
	// Build labels enginehealth_build_info (nil: not exported).
	Build *BuildLabels
}

// BuildLabels are the labels of enginehealth_build_info.
type BuildLabels struct {
	Version, Commit, BuildDate, GoVersion, Platform string
	SchemaVersion                                   int
}

// Task names a configured workflow task.
type Task struct{ Workflow, Task string }

// Metrics of one daemon.
type Metrics struct {
	reg           *prometheus.Registry
	passDuration  prometheus.Histogram
	passes        *prometheus.CounterVec
	claimsExpired prometheus.Counter
	repaired      *prometheus.CounterVec
	retries       *prometheus.CounterVec
	outcomes      *prometheus.CounterVec
	gradeChanges  *prometheus.CounterVec
	requests      *prometheus.CounterVec
	violations    *prometheus.CounterVec

	// violationNodes are the node label values of violations so far: an
	// engine writes the node names its claims carry, so at most
	// maxViolationNodes distinct valid names become labels (others are
	// "(other)", and a name that is not a valid node name "(invalid)").
	violationNodes map[string]bool
}

// maxViolationNodes bounds the node labels of
// enginehealth_protocol_violations_total.
const maxViolationNodes = 100

// New returns the daemon's metrics, registered with their own registry.
func New(src Source) *Metrics {
	m := &Metrics{
		reg:            prometheus.NewRegistry(),
		violationNodes: map[string]bool{"": true},
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "check_pass_duration_seconds",
			Help:    "Duration of the CheckEngineHealth passes this node ran as master.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "check_passes_total",
			Help: "CheckEngineHealth passes this node ran as master, by result (ok, failed, disruption)."}, []string{"result"}),
		claimsExpired: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "claims_expired_total",
			Help: "Expired claims this node deleted as master."}),
		repaired: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "instances_repaired_total",
			Help: "Interrupted or failed instances this node acted on as master, by workflow, task and action (retried, scheduled, held, failed)."},
			[]string{"workflow", "task", "action"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "due_retries_total",
			Help: "Due retries this node ran as master, by outcome (retried: back to begin; cancelled: the instance was moved by someone else)."},
			[]string{"outcome"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "retries_total",
			Help: "Retries by workflow, task and outcome, as this node saw them as master: scheduled (a policy decided a retry, at once or later), succeeded (the retried instance reached an end state or went on past the task), failed (the engine failed the retry and no on_failure policy decides), exhausted (failed for good after max_attempts)."},
			[]string{"workflow", "task", "outcome"}),
		gradeChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "grade_changes_total",
			Help: "Failover grade changes this node made as master, by the grade a node went to."}, []string{"grade"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "api_requests_total",
			Help: "API requests answered by this node, by route and status code."}, []string{"route", "code"}),
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "protocol_violations_total",
			Help: "Violations of the claim protocol this node found as master (each once), by kind (claim_without_node, claim_not_interim, interim_without_claim, claim_by_not_responding, late_write), workflow and node (\"\" when unknown)."},
			[]string{"kind", "workflow", "node"}),
	}
	for _, r := range []string{"ok", "failed", "disruption"} {
		m.passes.WithLabelValues(r)
	}
	for _, o := range []string{"retried", "cancelled"} {
		m.retries.WithLabelValues(o)
	}
	for _, g := range grades {
		m.gradeChanges.WithLabelValues(g)
	}
	seen := map[string]bool{}
	for _, t := range src.Tasks {
		if !seen[t.Workflow] {
			seen[t.Workflow] = true
			for _, k := range recovery.ViolationKinds {
				m.violations.WithLabelValues(k, t.Workflow, "")
			}
		}
		for _, a := range actions {
			m.repaired.WithLabelValues(t.Workflow, t.Task, a)
		}
		for _, o := range outcomes {
			m.outcomes.WithLabelValues(t.Workflow, t.Task, o)
		}
	}
	m.reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector(),
		m.passDuration, m.passes, m.claimsExpired, m.repaired, m.retries, m.outcomes, m.gradeChanges, m.requests, m.violations, newScrape(src))
	return m
}

// Registry returns the registry (for tests and lint).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// ObservePass counts one check pass (health.CheckConfig.OnPass).
func (m *Metrics) ObservePass(res health.CheckResult, err error) {
	m.passDuration.Observe(res.Took.Seconds())
	switch {
	case err != nil:
		m.passes.WithLabelValues("failed").Inc()
	case res.Disruption:
		m.passes.WithLabelValues("disruption").Inc()
	default:
		m.passes.WithLabelValues("ok").Inc()
	}
	m.claimsExpired.Add(float64(res.Recovery.ClaimsExpired))
	for _, t := range append(res.Recovery.Tasks, res.Failures...) {
		for action, n := range map[string]int64{"retried": t.Retried, "scheduled": t.Scheduled, "held": t.Held, "failed": t.Failed} {
			if n > 0 {
				m.repaired.WithLabelValues(t.Workflow, t.Task, action).Add(float64(n))
			}
		}
		m.add(m.outcomes, float64(t.Retried+t.Scheduled), t.Workflow, t.Task, "scheduled")
		m.add(m.outcomes, float64(t.Exhausted), t.Workflow, t.Task, "exhausted")
	}
	for _, sc := range res.Settled {
		m.add(m.outcomes, float64(sc.Succeeded), sc.Workflow, sc.Task, "succeeded")
		m.add(m.outcomes, float64(sc.Failed), sc.Workflow, sc.Task, "failed")
	}
	m.retries.WithLabelValues("retried").Add(float64(res.Retries.Retried))
	m.retries.WithLabelValues("cancelled").Add(float64(res.Retries.Cancelled))
	for _, g := range res.Grades {
		m.gradeChanges.WithLabelValues(g.To).Inc()
	}
	for _, v := range res.Violations {
		m.add(m.violations, float64(v.Count), v.Kind, v.Workflow, m.violationNode(v.Node))
	}
}

// violationNode is the node label of a violation about node (see
// Metrics.violationNodes). ObservePass runs on the master's pass
// goroutine only.
func (m *Metrics) violationNode(node string) string {
	switch {
	case m.violationNodes[node]:
		return node
	case nodes.ValidName(node) != nil:
		return "(invalid)"
	case len(m.violationNodes) > maxViolationNodes:
		return "(other)"
	}
	m.violationNodes[node] = true
	return node
}

// add adds n (when positive) to the counter of labels.
func (m *Metrics) add(c *prometheus.CounterVec, n float64, labels ...string) {
	if n > 0 {
		c.WithLabelValues(labels...).Add(n)
	}
}

// ObserveRequest counts one API request by its route pattern ("" when
// the request was refused before routing) and status code.
func (m *Metrics) ObserveRequest(route string, code int) {
	switch route {
	case "":
		route = "refused"
	case "/":
		route = "unknown"
	}
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
}

var (
	grades   = []string{nodes.GradeNormal, nodes.GradeWarning, nodes.GradeError}
	actions  = []string{"retried", "scheduled", "held", "failed"}
	outcomes = []string{"scheduled", "succeeded", "failed", "exhausted"}
)

// scrape is the collector of the gauges read at scrape time.
type scrape struct {
	src                                                           Source
	nodes, age, grade, dbUp, self, selfGrade, master, term        *prometheus.Desc
	disruption, lastSuccess, failures, holds, oldest, period      *prometheus.Desc
	paused, pausedFor, events, readAge, certExpiry, etcdUp, build *prometheus.Desc

	// mu guards last: the database's values as the last scrape that
	// could read them saw them. A scrape that cannot read the database
	// (database_up 0) exports them for up to staleFor, their ages moved
	// on, so that a short outage does not cut every registry series and
	// restart the alerts' "for" clocks.
	mu   sync.Mutex
	last dbValues
}

// staleFor bounds how long a scrape exports the last values read.
const staleFor = 10 * time.Minute

// dbValues are the scrape's database reads; ok: each was read.
type dbValues struct {
	at          time.Time
	nodes       []nodes.Node
	nodesOK     bool
	holds       int64
	oldest      time.Duration
	holdsOK     bool
	paused      bool
	pausedSince time.Time
	pausedOK    bool
	events      int64
	eventsOK    bool
}

func newScrape(src Source) *scrape {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, nil)
	}
	src.Timeout = cmp.Or(src.Timeout, 2*time.Second)
	return &scrape{src: src,
		nodes:       d("nodes", "Node records by status.", "status"),
		age:         d("node_heartbeat_age_seconds", "Seconds since each node's last heartbeat, on the database clock.", "node"),
		grade:       d("node_failover_grade", "Failover grade of each node: 1 for its grade, 0 for the others.", "node", "grade"),
		dbUp:        d("database_up", "1 when this scrape could read the node registry, else 0."),
		self:        d("self_status", "This node's status as its last heartbeat saw it: 1 for it, 0 for the others.", "status"),
		selfGrade:   d("self_failover_grade", "This node's failover grade: 1 for it, 0 for the others.", "grade"),
		master:      d("is_master", "1 while this node acts as master."),
		term:        d("master_term", "The term of this node's office while it acts as master, else 0."),
		disruption:  d("disruption_mode", "1 while this master's last pass found most nodes unresponsive and did nothing."),
		lastSuccess: d("check_last_success_age_seconds", "Seconds since this node's last successful check pass as master, or since it took office if none succeeded since; absent before the first office."),
		failures:    d("check_consecutive_failures", "Check passes failed in a row on this node."),
		holds:       d("holds_open", "Instances held for an operator's decision."),
		oldest:      d("holds_oldest_age_seconds", "Seconds the oldest open hold has waited; 0 when none."),
		period:      d("check_period_seconds", "The period of the CheckEngineHealth schedule."),
		paused:      d("paused", "1 while the cluster is paused (no automatic repair, expiry or retry)."),
		pausedFor:   d("paused_seconds", "Seconds the cluster has been paused; 0 when it is not."),
		events:      d("events_written_total", "Events written to the audit trail, cluster-wide (the newest event id)."),
		readAge:     d("database_read_age_seconds", "Seconds since the registry, holds and pause values exported were read: 0 when this scrape read them, more while the database cannot be read (they are exported for up to 10 min)."),
		certExpiry:  d("certificate_expiry_seconds", "Seconds until each certificate file of this node expires, negative once expired, by the key path of its setting (which).", "which"),
		build:       d("build_info", "Always 1; its labels say what this binary was built from: version, commit (empty outside a checkout), build_date (RFC 3339; empty when unknown), goversion, platform, and schema_version (the sidecar schema it migrates to).", "version", "commit", "build_date", "goversion", "platform", "schema_version"),
		etcdUp:      d("etcd_reachable", "1 when this node's last check of etcd (a read of its prefix, every lease TTL) succeeded, else 0."),
	}
}

// read reads the database's values; when the node registry cannot be
// read (up false) it returns the last values read instead, if they are
// younger than staleFor.
func (s *scrape) read(ctx context.Context) (dbValues, bool) {
	// Bounded by ctx even when the database does not answer (lib/pq
	// would wait for the connection's read deadline): the last values
	// are exported instead.
	v, _ := pgdb.Await(ctx, func(ctx context.Context) (dbValues, error) { return s.readNow(ctx), nil })
	up := v.nodesOK || s.src.Nodes == nil && !v.at.IsZero()
	s.mu.Lock()
	defer s.mu.Unlock()
	if up {
		s.last = v
		return v, true
	}
	if !s.last.at.IsZero() && time.Since(s.last.at) < staleFor {
		return s.last, false
	}
	return dbValues{}, false
}

// readNow reads the database's values; the registry first, the others
// only if it could be read.
func (s *scrape) readNow(ctx context.Context) dbValues {
	v := dbValues{at: time.Now()}
	var err error
	up := true
	if s.src.Nodes != nil {
		v.nodes, err = s.src.Nodes(ctx)
		v.nodesOK, up = err == nil, err == nil
	}
	if s.src.HoldsOpen != nil && up {
		v.holds, v.oldest, err = s.src.HoldsOpen(ctx)
		v.holdsOK = err == nil
	}
	if s.src.Paused != nil && up {
		v.paused, v.pausedSince, err = s.src.Paused(ctx)
		v.pausedOK = err == nil
	}
	if s.src.EventsWritten != nil && up {
		v.events, err = s.src.EventsWritten(ctx)
		v.eventsOK = err == nil
	}
	return v
}

// Describe sends the descriptions without reading anything (registration
// happens before the daemon's parts exist).
func (s *scrape) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.nodes, s.age, s.grade, s.dbUp, s.self, s.selfGrade, s.master, s.term,
		s.disruption, s.lastSuccess, s.failures, s.holds, s.oldest, s.period, s.paused, s.pausedFor, s.events, s.readAge, s.certExpiry, s.etcdUp, s.build} {
		ch <- d
	}
}

func (s *scrape) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.src.Timeout)
	defer cancel()
	v, up := s.read(ctx)
	if s.src.Nodes != nil {
		gauge(s.dbUp, b2f(up))
	}
	// stale: what the ages read then have grown by (0 when read now).
	var stale time.Duration
	if !up && !v.at.IsZero() {
		stale = time.Since(v.at)
	}
	if !v.at.IsZero() {
		gauge(s.readAge, stale.Seconds())
	}
	if v.nodesOK {
		count := map[nodes.Status]int{}
		for _, n := range v.nodes {
			count[n.Status]++
			gauge(s.age, n.SecondsSinceActive+stale.Seconds(), n.Name)
			for _, g := range grades {
				gauge(s.grade, b2f(n.FailoverGrade == g), n.Name, g)
			}
		}
		for _, st := range nodes.Statuses {
			gauge(s.nodes, float64(count[st]), string(st))
		}
	}
	if v.holdsOK {
		gauge(s.holds, float64(v.holds))
		oldest := v.oldest
		if v.holds > 0 {
			oldest += stale
		}
		gauge(s.oldest, oldest.Seconds())
	}
	if v.pausedOK {
		gauge(s.paused, b2f(v.paused))
		since := 0.0
		if v.paused && !v.pausedSince.IsZero() {
			since = math.Round(time.Since(v.pausedSince).Seconds())
		}
		gauge(s.pausedFor, since)
	}
	if v.eventsOK {
		ch <- prometheus.MustNewConstMetric(s.events, prometheus.CounterValue, float64(v.events))
	}
	if s.src.Status != nil {
		st := s.src.Status()
		for _, x := range nodes.Statuses {
			gauge(s.self, b2f(st == x), string(x))
		}
	}
	if s.src.Grade != nil {
		g := s.src.Grade()
		for _, x := range grades {
			gauge(s.selfGrade, b2f(g == x), x)
		}
	}
	if s.src.Master != nil {
		acting, term := s.src.Master()
		gauge(s.master, b2f(acting))
		if !acting {
			term = 0
		}
		gauge(s.term, float64(term))
	}
	if s.src.Period > 0 {
		gauge(s.period, s.src.Period.Seconds())
	}
	if s.src.Disrupted != nil {
		gauge(s.disruption, b2f(s.src.Disrupted()))
	}
	if s.src.Passes != nil {
		p := s.src.Passes()
		if !p.LastSuccess.IsZero() {
			gauge(s.lastSuccess, time.Since(p.LastSuccess).Seconds())
		}
		gauge(s.failures, float64(p.ConsecutiveFailures))
	}
	if s.src.Certificates != nil {
		for _, e := range s.src.Certificates() {
			gauge(s.certExpiry, math.Round(e.Left.Seconds()), e.Which)
		}
	}
	if s.src.EtcdReachable != nil {
		gauge(s.etcdUp, b2f(s.src.EtcdReachable()))
	}
	if b := s.src.Build; b != nil {
		gauge(s.build, 1, b.Version, b.Commit, b.BuildDate, b.GoVersion, b.Platform, strconv.Itoa(b.SchemaVersion))
	}
}
