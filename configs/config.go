// Package configs loads and validates the enginehealth configuration file.
//
// It is the only package that knows the file format and the environment
// variables. Load parses one YAML file strictly (unknown keys are errors),
// applies the defaults named below, resolves secrets from files or environment
// variables, and validates every field and the relations between them. Every
// problem is reported with its key path and, where the YAML gives it, its line.
package configs

import (
	"crypto/tls"
	"slices"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/infra/tlsfiles"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// Defaults of the daemon's own settings (shutdown, etcd's auto-sync, the
// listener, logging, the claims table's column names), applied by Load
// when a key is absent. Every other default is its owner's constant
// (nodes.DefaultHeartbeatInterval, recovery.DefaultMaxAttempts, …).
const (
	DefaultShutdownTimeout  = 10 * time.Second
	DefaultAutoSyncInterval = 30 * time.Second
	DefaultListen           = "127.0.0.1:8642"
	DefaultSessionTTL       = 8 * time.Hour
	DefaultLogFormat        = "auto"
	DefaultLogLevel         = "info"
	DefaultInstanceColumn   = "instance_id"
	DefaultNodeColumn       = "node"
	DefaultTokenColumn      = "token"
	DefaultClaimedAtColumn  = "claimed_at"
	DefaultExpiresAtColumn  = "expires_at"
)

// Config is the whole configuration file.
type Config struct {
	Node      Node       `yaml:"node"`
	Database  Database   `yaml:"database"`
	Etcd      Etcd       `yaml:"etcd"`
	Health    Health     `yaml:"health"`
	Recovery  Recovery   `yaml:"recovery"`
	Failover  Failover   `yaml:"failover"`
	API       API        `yaml:"api"`
	Log       Log        `yaml:"log"`
	Workflows []Workflow `yaml:"workflows"`

	// Path is the file the configuration was loaded from.
	Path string `yaml:"-"`
	// Warnings lists settings that are valid but probably not what an operator
	// wants (e.g. a trust window shorter than an etcd election).
	Warnings []Problem `yaml:"-"`

	files []string // every file a key names, resolved
}

// Files returns every file the configuration's keys name (secrets,
// certificates), resolved as Load read them: what a reload re-reads.
func (c *Config) Files() []string { return slices.Clone(c.files) }

// Node identifies this sidecar.
type Node struct {
	// Name of the node record; default: the hostname. Letters, digits,
	// '.', '_' and '-', at most 63 characters.
	Name string `yaml:"name"`
	// HeartbeatInterval between two updates of last_active; default 5s.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// ShutdownTimeout bounds a clean shutdown; default 10s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// OnUnexpectedShutdown decides what a restart does when the last run did not
	// shut down cleanly. "ack" (default): the node stays in Unexpected
	// shutdown, out of service, until an operator runs `enginehealth node
	// ack`. "recover": it is logged and the node goes through recovery
	// like a new one.
	OnUnexpectedShutdown string `yaml:"on_unexpected_shutdown"`
	// StateDir is where the daemon records its etcd lease for
	// `enginehealth release-lease` (an absolute path); default
	// $STATE_DIRECTORY, which systemd's StateDirectory= sets.
	StateDir string `yaml:"state_dir"`

	// StateDirectory is the state directory in use: StateDir, else the
	// first of $STATE_DIRECTORY; empty: none (no lease file).
	StateDirectory string `yaml:"-"`
}

// Database is the PostgreSQL connection. Exactly one of DSNFile and DSNEnv.
type Database struct {
	// DSNFile is a file holding the DSN (URL or key=value form).
	DSNFile string `yaml:"dsn_file"`
	// DSNEnv names an environment variable holding the DSN.
	DSNEnv string `yaml:"dsn_env"`
	// Schema holds the sidecar's own tables; default "enginehealth".
	Schema string `yaml:"schema"`
	// StatementTimeout for every statement of the daemon; default 30s.
	StatementTimeout time.Duration `yaml:"statement_timeout"`
	// ConnectTimeout bounds one connection attempt and each network read
	// when a query is cancelled; default 5s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// MaxOpenConns of the pool; default 10.
	MaxOpenConns int `yaml:"max_open_conns"`

	// DSN is the resolved secret. Never log it: use RedactedDSN.
	DSN string `yaml:"-"`
}

// Etcd is the election backend.
type Etcd struct {
	// Endpoints of the etcd cluster (host:port or URLs): the seeds the
	// client starts from; give all members. With AutoSyncInterval the
	// client then follows the cluster's membership.
	Endpoints []string `yaml:"endpoints"`
	// Prefix of the election keys; default "/enginehealth/".
	Prefix string `yaml:"prefix"`
	// LeaseTTL of the session lease; default 10s, at least 3s.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// TrustMargin shortens the trust window: the master stops acting when its
	// last keep-alive is older than LeaseTTL − TrustMargin; default 1s.
	TrustMargin time.Duration `yaml:"trust_margin"`
	// DialTimeout of one connection attempt; default 5s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// AutoSyncInterval is how often the client asks the cluster for its
	// members and uses their client URLs in place of the endpoints it
	// has; default 30s, 0 turns it off (nil: absent, the default).
	AutoSyncInterval *time.Duration `yaml:"auto_sync_interval"`
	// TLS, when given, is how the client speaks TLS to etcd (endpoints
	// without a scheme are then https); absent: plain http.
	TLS *TLS `yaml:"tls"`
	// Username for etcd authentication (etcd auth enabled); its password
	// comes from PasswordFile or PasswordEnv, exactly one of them.
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password_file"`
	PasswordEnv  string `yaml:"password_env"`

	// Password is the resolved secret; never log it.
	Password string `yaml:"-"`
	// ClientTLS is the client's TLS configuration, loaded from TLS by
	// Load (nil without TLS).
	ClientTLS *tls.Config `yaml:"-"`
	// ClientCert holds the client certificate ClientTLS presents (nil
	// without one): a reload can swap it under the running client.
	ClientCert *tlsfiles.Cert `yaml:"-"`
	// CAs holds the pool of TLS.CAFile and its certificates (nil without
	// one): the daemon verifies each new connection to a member against
	// the pool it holds then, so a reload can swap it.
	CAs *tlsfiles.CAs `yaml:"-"`
}

// TLS is the client side of a TLS connection: PEM files (relative ones
// are relative to the configuration file), every key optional.
type TLS struct {
	// CAFile verifies the servers' certificates; default: the system's
	// roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile: the client certificate and its unencrypted
	// key, for servers that ask for one; both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName the servers' certificates must be for; default: the
	// host of each endpoint.
	ServerName string `yaml:"server_name"`
}

// Health configures CheckEngineHealth.
type Health struct {
	// Schedule in robfig/cron syntax; default "@every 15s".
	Schedule string `yaml:"schedule"`
	// NotRespondingAfter is the age of last_active past which a node is marked
	// Not responding; default 30s, at least 3 × node.heartbeat_interval.
	NotRespondingAfter time.Duration `yaml:"not_responding_after"`
	// ForgetAfter is how long a record may stay unresponsive before it is
	// deleted; default 24h.
	ForgetAfter time.Duration `yaml:"forget_after"`
	// MaxUnresponsiveFraction is the disruption guard; default 0.55.
	MaxUnresponsiveFraction float64 `yaml:"max_unresponsive_fraction"`
	// SweepInterval is how often a pass looks for every interrupted
	// instance, also those without any claim (claims deleted by hand, an
	// engine that broke the protocol), not only those whose claims it
	// expired; default 10m (one period of Schedule when that is longer),
	// at least one period of Schedule, at most 24h.
	SweepInterval time.Duration `yaml:"sweep_interval"`

	// ParsedSchedule is Schedule, parsed by Load.
	ParsedSchedule health.Schedule `yaml:"-"`
}

// Recovery configures repairs.
type Recovery struct {
	// BatchSize of one repair transaction; default 10000.
	BatchSize int `yaml:"batch_size"`
}

// Failover configures the failover grades of nodes (NORMAL, WARNING,
// ERROR; nodes.Store.Grade).
type Failover struct {
	// Window is the span within which a second interruption with another
	// signature makes a WARNING node ERROR; default 1h.
	Window time.Duration `yaml:"window"`
	// QuietPeriod without interruptions brings a node back to NORMAL;
	// default 1h.
	QuietPeriod time.Duration `yaml:"quiet_period"`
	// MaxErrorFraction of the nodes may be ERROR at once; default 0.34,
	// 0 is a setting (no node ever ERROR).
	MaxErrorFraction *float64 `yaml:"max_error_fraction"`
	// ErrorNotReady makes /readyz answer 503 while this node is ERROR.
	ErrorNotReady bool `yaml:"error_not_ready"`
}

// Grades returns the grading settings.
func (f Failover) Grades() nodes.GradeConfig {
	return nodes.GradeConfig{Window: f.Window, QuietPeriod: f.QuietPeriod, MaxErrorFraction: *f.MaxErrorFraction}
}

// API is the HTTP listener.
type API struct {
	// Listen address; default 127.0.0.1:8642. Port 0 picks a free port.
	Listen string `yaml:"listen"`
	// Advertise is the address other nodes and the CLI use; default: the
	// address actually bound.
	Advertise string `yaml:"advertise"`
	// TokensFile names the operators: a YAML list of {name, sha256,
	// role}, each the SHA-256 of a bearer token (see Operator).
	TokensFile string `yaml:"tokens_file"`
	// TokenFile / TokenEnv: one bearer token, the operator named
	// "operator" with role operate (not with TokensFile). With none of
	// the three, mutations are off.
	TokenFile string `yaml:"token_file"`
	TokenEnv  string `yaml:"token_env"`
	// AuthReads means every read but /healthz, /readyz, /metrics and the
	// nodes' own /v1/leader?local=true needs a token of either role (or
	// a client certificate from TLS.ClientCAFile: role read, its CN the
	// name).
	AuthReads bool `yaml:"auth_reads"`
	// SessionTTL is how long a console session lasts after its sign-in.
	SessionTTL time.Duration `yaml:"session_ttl"`
	// TLS serves the API over HTTPS (nil: plain HTTP).
	TLS *APITLS `yaml:"tls"`

	// Token is the resolved secret of TokenFile or TokenEnv; never log it.
	Token string `yaml:"-"`
	// Operators holds the operators, from TokensFile, or Token as the
	// operator "operator".
	Operators []Operator `yaml:"-"`

	// ServerTLS serves the API (from TLS; nil without). Its certificate
	// comes from ServerCert and its client CAs from ClientCAs, which a
	// reload replaces.
	ServerTLS  *tls.Config    `yaml:"-"`
	ServerCert *tlsfiles.Cert `yaml:"-"`
	ClientCAs  *tlsfiles.CAs  `yaml:"-"`
	// PeerTLS is the client side between nodes (forwarding to the master,
	// asking a node for its view): dialled with tlsfiles.DialFunc, it
	// verifies the other node's certificate against PeerCAs (nil: the
	// system's roots) and presents ServerCert.
	PeerTLS *tls.Config   `yaml:"-"`
	PeerCAs *tlsfiles.CAs `yaml:"-"`
}

// Client authentication modes of api.tls.client_auth.
const (
	ClientAuthNone    = "none"
	ClientAuthRequest = "request"
	ClientAuthRequire = "require"
)

// APITLS is api.tls: the API's certificate, and the CAs it trusts.
type APITLS struct {
	// CertFile and KeyFile: this node's certificate and key (PEM),
	// required. Under client_auth require, the same certificate is
	// presented when this node forwards a request to the master: issue it
	// for both server and client authentication.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile verifies client certificates (optional).
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientAuth is none (no client certificate asked), request (verified
	// when given) or require (every connection presents one from
	// ClientCAFile); default require with ClientCAFile, else none.
	ClientAuth string `yaml:"client_auth"`
	// CAFile verifies the other nodes' certificates when this node talks
	// to them; default ClientCAFile, else the system's roots.
	CAFile string `yaml:"ca_file"`
}

// Scheme is the API's URL scheme: https with api.tls, else http.
func (a API) Scheme() string {
	if a.TLS != nil {
		return "https"
	}
	return "http"
}

// AdvertiseURL is the address other nodes and the CLI reach this node at:
// api.advertise, else bound (the address actually bound); with api.tls,
// as an https:// URL.
func (a API) AdvertiseURL(bound string) string {
	addr := a.Advertise
	if addr == "" {
		addr = bound
	}
	if a.TLS != nil && !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	return addr
}

// Log configures logging.
type Log struct {
	// Format is auto (tint on a terminal, JSON otherwise), text or json.
	Format string `yaml:"format"`
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
}

// Workflow is one instance table of the engine.
type Workflow struct {
	Name string `yaml:"name"`
	// Table is the instance table, optionally schema-qualified.
	Table        string `yaml:"table"`
	IDColumn     string `yaml:"id_column"`
	StatusColumn string `yaml:"status_column"`
	// ErrorColumn (optional) is matched by non_retryable patterns.
	ErrorColumn string `yaml:"error_column"`
	// UpdatedColumn (optional): a timestamp the engine sets whenever it
	// changes an instance's state; an on_failure policy needs it to find
	// new failures.
	UpdatedColumn string `yaml:"updated_column"`
	// Claimable workflows take claims; only they are repaired by the
	// periodic check. Others are repaired by start-up recovery only.
	Claimable bool   `yaml:"claimable"`
	Claims    *Claim `yaml:"claims"`
	Tasks     []Task `yaml:"tasks"`
}

// Claim maps the claims table of a claimable workflow.
type Claim struct {
	Table string `yaml:"table"`
	// Column names; defaults: instance_id, node, token, claimed_at, expires_at.
	InstanceColumn  string `yaml:"instance_column"`
	NodeColumn      string `yaml:"node_column"`
	TokenColumn     string `yaml:"token_column"`
	ClaimedAtColumn string `yaml:"claimed_at_column"`
	ExpiresAtColumn string `yaml:"expires_at_column"`
}

// Task is one state task of a workflow.
type Task struct {
	Name    string   `yaml:"name"`
	Begin   string   `yaml:"begin"`
	Interim string   `yaml:"interim"`
	End     string   `yaml:"end"`
	Ends    []string `yaml:"ends"`
	Failed  string   `yaml:"failed"`
	// AtomicInternal means the task's whole effect is one transaction, so an
	// interrupted run can be reverted to Begin.
	AtomicInternal bool `yaml:"atomic_internal"`
	// ClaimTimeout of a claim on this task; default 5m.
	ClaimTimeout time.Duration `yaml:"claim_timeout"`
	// OnInterrupt says what happens to an instance found interrupted. Default:
	// for an atomic_internal task retry at once, at most 10 times; for
	// others none (→ failed).
	OnInterrupt *Policy `yaml:"on_interrupt"`
	// OnFailure says what happens to an instance the engine failed; default
	// none.
	OnFailure *Policy `yaml:"on_failure"`
}

// EndStates returns the task's end states (End or Ends).
func (t Task) EndStates() []string {
	if t.End != "" {
		return []string{t.End}
	}
	return t.Ends
}

// Policy is a retry policy.
type Policy struct {
	// Strategy is none (default), retry or hold.
	Strategy recovery.Strategy `yaml:"strategy"`
	// MaxAttempts is the number of retries (the original execution is attempt
	// 0); default 2, or the length of a backoff schedule, which it may not
	// exceed.
	MaxAttempts int     `yaml:"max_attempts"`
	Backoff     Backoff `yaml:"backoff"`
	// NonRetryable patterns (regular expressions) matched against the
	// workflow's error column; a match is final at once.
	NonRetryable []string `yaml:"non_retryable"`
}

// Backoff is the delay before a retry.
type Backoff struct {
	// Kind is fixed, linear, exponential (default), fibonacci,
	// randomized_exponential or schedule.
	Kind recovery.BackoffKind `yaml:"kind"`
	// Base delay; default 30s (0 is a setting: no delay).
	Base *time.Duration `yaml:"base"`
	// MaxDelay caps every delay; default 1h.
	MaxDelay time.Duration `yaml:"max_delay"`
	// Jitter as a fraction in [0, 1): each delay is scaled by 1 ± jitter.
	// Default 0.2 for fixed, linear, exponential and fibonacci, 0 (off)
	// for randomized_exponential and schedule; 0 is a setting: off.
	Jitter *float64 `yaml:"jitter"`
	// Multiplier of exponential and randomized_exponential; default 2.
	Multiplier float64 `yaml:"multiplier"`
	// Schedule lists explicit delays, for kind schedule.
	Schedule []time.Duration `yaml:"schedule"`
}
