// Package apitype holds the HTTP API's request and answer types: the
// JSON the daemon takes and sends, which the CLI's client decodes and
// prints with -o json. Their field names are the contract scripts read;
// the domain's types (nodes, recovery, health, audit, claims) carry no
// JSON of their own, and the api package converts them into these.
//
// Every answer follows jsonx's rule: every field is sent, null when it
// has no value (a field tagged null:"zero", whose type's MarshalJSON
// calls jsonx.Marshal). Only request bodies, which clients send, may
// leave a field out (omitempty).
//
// The types hold the standard library's types, their own, and, for an
// enumeration, the domain's named string type (nodes.Status,
// recovery.Cause, recovery.RunKind, recovery.Trigger; audit.Kind), whose
// JSON is its string: never a domain struct (archtest checks it).
package apitype

import (
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/jsonx"
)

// ErrorBody is the body of every error response.
type ErrorBody struct {
	// Error says what is wrong, naming the parameter at fault
	// ("path parameter name: ...", "body.reason: ...").
	Error string `json:"error"`
	// Detail, when set, says more: what was expected, what was got;
	// null when there is nothing more to say.
	Detail string `json:"detail" null:"zero"`
	// RequestID is the request's X-Request-Id, under which the daemon
	// logs what it did with it (null only where no request id was set,
	// outside the edge).
	RequestID string `json:"request_id" null:"zero"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (e ErrorBody) MarshalJSON() ([]byte, error) { return jsonx.Marshal(e) }

// Ready is the body of GET /readyz.
type Ready struct {
	Ready  bool   `json:"ready"`
	Status string `json:"status"`
	// Grade is the node's failover grade (an ERROR node is not ready with
	// failover.error_not_ready); null before the node's first heartbeat
	// read it.
	Grade string `json:"grade" null:"zero"`
	// Reason says why the node is not ready; null when it is.
	Reason string `json:"reason" null:"zero"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (r Ready) MarshalJSON() ([]byte, error) { return jsonx.Marshal(r) }

// Health is the body of /healthz.
type Health struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// Leader is the body of GET /v1/leader: the acting master, as it sees
// itself. A master acts when it took office and its lease is inside its
// trust window; the election key alone does not make a master.
type Leader struct {
	Name        string `json:"name"`
	Incarnation string `json:"incarnation"`
	APIAddress  string `json:"api_address"`
	Term        int64  `json:"term"`
	// Since is when it took office.
	Since time.Time `json:"since" null:"zero"`
	// TrustedUntil is the end of its current trust window (renewed with
	// every answered etcd keep-alive).
	TrustedUntil time.Time `json:"trusted_until" null:"zero"`
	// Passes says how its CheckEngineHealth passes go.
	Passes PassStats `json:"passes"`
	// Stuck, when set, says why the master counts as stuck: no pass
	// succeeded for max(3 × period, 1 min); null when it is not.
	Stuck string `json:"stuck" null:"zero"`
	// AnsweredBy is the node whose own state this answer is.
	AnsweredBy string `json:"answered_by"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (l Leader) MarshalJSON() ([]byte, error) { return jsonx.Marshal(l) }

// PassStats tells whether the check passes of a master succeed. A time
// or text that has none is null.
type PassStats struct {
	// LastSuccess is the end of the last pass that succeeded.
	LastSuccess time.Time `json:"last_success" null:"zero"`
	// LastFailure is the end of the last pass that failed.
	LastFailure time.Time `json:"last_failure" null:"zero"`
	// ConsecutiveFailures since the last success.
	ConsecutiveFailures int `json:"consecutive_failures"`
	// LastError of the last failed pass.
	LastError string `json:"last_error" null:"zero"`
	// Disruption says why the last pass that succeeded did nothing: the
	// disruption guard held (null when it did not).
	Disruption string `json:"disruption" null:"zero"`
	// LastSweep is when the last sweep began (a pass that looked for
	// every interrupted instance, not only those whose claims it
	// expired); null before the first.
	LastSweep time.Time `json:"last_sweep" null:"zero"`
	// NextSweep is when the next sweep is expected; null when none is:
	// no periodic schedule, or the last pass found the cluster paused.
	NextSweep time.Time `json:"next_sweep" null:"zero"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (p PassStats) MarshalJSON() ([]byte, error) { return jsonx.Marshal(p) }

// Status is the body of GET /v1/status: what an operator asks first.
type Status struct {
	// Node is this node, as its readiness says.
	Node SelfState `json:"node"`
	// Master is the acting master (as GET /v1/leader), or null with
	// MasterError saying why no node acts.
	Master      *Leader `json:"master"`
	MasterError string  `json:"master_error" null:"zero"`
	// Paused is the pause switch.
	Paused Pause `json:"paused"`
	// Disruption says why the master's last pass did nothing (null when the
	// guard does not hold).
	Disruption string `json:"disruption" null:"zero"`
	// Checks holds the acting master's check passes (last_success,
	// consecutive_failures, last_error) and sweeps (last_sweep,
	// next_sweep); zero without a master.
	Checks PassStats `json:"checks"`
	// Nodes counts node records by status; NotReady lists those not
	// Ready or not NORMAL, with why.
	Nodes    map[string]int `json:"nodes"`
	NotReady []NodeState    `json:"not_ready"`
	// LastRun is the newest run (null before the first); LastActed, the
	// newest that did something (expired claims, repaired, failed, or
	// was asked for by an operator), which LastRun often is not: most
	// passes find nothing to do.
	LastRun   *Run         `json:"last_run"`
	LastActed *Run         `json:"last_acted"`
	Holds     HoldsSummary `json:"holds"`
	// Certificates lists the answering node's certificate files, and when
	// each expires (empty without any); those expiring soon are
	// warnings.
	Certificates []Certificate `json:"certificates"`
	// Etcd says whether the answering node reaches etcd now (null when the
	// node does not check it).
	Etcd *EtcdState `json:"etcd"`
	// Build is the answering node's build (null when not said).
	Build *Build `json:"build"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (s Status) MarshalJSON() ([]byte, error) { return jsonx.Marshal(s) }

// SelfState is the answering node's own state.
type SelfState struct {
	Name string `json:"name"`
	Ready
}

// MarshalJSON sends the name and the readiness's fields in place (as
// without it: Ready's MarshalJSON would otherwise be promoted and send
// the readiness alone).
func (s SelfState) MarshalJSON() ([]byte, error) { return jsonx.Marshal(s) }

// NodeState is a node record in short, with why it is where it is.
type NodeState struct {
	Name               string    `json:"name"`
	Status             string    `json:"status"`
	Grade              string    `json:"grade"`
	IsMaster           bool      `json:"is_master"`
	LastActive         time.Time `json:"last_active"`
	SecondsSinceActive float64   `json:"seconds_since_active"`
	Why                string    `json:"why" null:"zero"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (n NodeState) MarshalJSON() ([]byte, error) { return jsonx.Marshal(n) }

// HoldsSummary counts the holds waiting for an operator.
type HoldsSummary struct {
	Open int64 `json:"open"`
	// OldestAgeSeconds is how long the oldest has waited; null with none.
	OldestAgeSeconds *float64 `json:"oldest_age_seconds"`
}

// Build is what a binary was built from: `enginehealth version -o json`,
// the status, and the enginehealth_build_info metric say the same.
type Build struct {
	Version string `json:"version"`
	// Commit is the VCS revision, "-dirty" appended when the tree had
	// changes; CommitTime its time. Null when built outside a checkout.
	Commit     string    `json:"commit" null:"zero"`
	CommitTime time.Time `json:"commit_time" null:"zero"`
	// BuildDate is when the binary was built (make sets it; null
	// otherwise).
	BuildDate time.Time `json:"build_date" null:"zero"`
	GoVersion string    `json:"go_version"`
	Platform  string    `json:"platform"`
	// SchemaVersion is the version of the sidecar's schema this binary
	// migrates to (its newest migration).
	SchemaVersion int `json:"schema_version"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (b Build) MarshalJSON() ([]byte, error) { return jsonx.Marshal(b) }

// EtcdState is whether a node reaches etcd, as its last check saw it.
type EtcdState struct {
	Reachable bool `json:"reachable"`
	// Error says why the last check failed, as the daemon diagnosed it (TLS
	// refused either way, authentication, permissions, unreachable);
	// null when it succeeded.
	Error string `json:"error" null:"zero"`
	// Since is when the node last went from reachable to not or back (the
	// daemon's start before the first change).
	Since time.Time `json:"since"`
	// CheckedAt is when the last check ended.
	CheckedAt time.Time `json:"checked_at"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (e EtcdState) MarshalJSON() ([]byte, error) { return jsonx.Marshal(e) }

// Certificate is one certificate file of the answering node and when it
// expires: a certificate with its intermediates when the first of them
// does, a CA file when the first of its CAs valid now does (see
// internal/infra/certexpiry).
type Certificate struct {
	// Which is the key path of the file's setting (etcd.tls.cert_file).
	Which string `json:"which"`
	// CN is the subject common name of the certificate that expires
	// (null when it has none).
	CN       string    `json:"cn" null:"zero"`
	NotAfter time.Time `json:"not_after"`
	// ExpiresInSeconds is the time left until NotAfter; negative once expired.
	ExpiresInSeconds float64 `json:"expires_in_seconds"`
	// ExpiringSoon means less than 7 days are left, or it expired.
	ExpiringSoon bool `json:"expiring_soon"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (c Certificate) MarshalJSON() ([]byte, error) { return jsonx.Marshal(c) }

// Expired reports whether the certificate has expired.
func (c Certificate) Expired() bool { return c.ExpiresInSeconds < 0 }
