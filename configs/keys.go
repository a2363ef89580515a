package configs

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/infra/leasefile"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// docs/configuration.md's reference of every key is written from Keys,
// the model's types and ReloadableKeys by internal/tools/configdoc;
// TestPageIsCurrent (in configdoc) fails when the page is stale.
//go:generate go run ../internal/tools/configdoc -page ../docs/configuration.md

// KeyDoc is what the reference says of one key, besides what the model's
// Go type says (its type, its place): a fact here is a value of the code
// (a Default* constant, a bound the validator uses), and a test holds
// each to what Load does (TestDocumentedDefaults, TestDocumentedRanges).
type KeyDoc struct {
	// Doc is one line of Markdown, what the key is for.
	Doc string
	// Default is the value Load applies when the key is absent (nil: none
	// that is one value; see DefaultText).
	Default any
	// DefaultText is a default in words, after Default when both are set
	// (a condition), else in its place ("the hostname", "required").
	DefaultText string
	// Min and Max: the bounds the validator holds the value to (nil:
	// none), exclusive when MinOpen or MaxOpen; a list's bounds are its
	// entries'.
	Min, Max         any
	MinOpen, MaxOpen bool
	// Values lists the values of an enumeration, all it accepts.
	Values []string
	// Rule states further constraints in words (relations to other keys).
	Rule string
}

// Values of the enumerations, as the validator accepts them.
var (
	unexpectedShutdowns = []string{nodes.UnexpectedShutdownAck, nodes.UnexpectedShutdownRecover}
	logFormats          = []string{"auto", "text", "json"}
	logLevels           = []string{"debug", "info", "warn", "error"}
	clientAuths         = []string{ClientAuthNone, ClientAuthRequest, ClientAuthRequire}
	strategies          = strs(recovery.Strategies)
	backoffKinds        = strs(recovery.BackoffKinds)
)

// strs are the values of an enumeration of the domain, as the file
// spells them.
func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// Keys a running daemon applies on reload (SIGHUP, or a change to the
// configuration file or a file it names), one list per part of the
// reloader (cmd/enginehealth/reload.go); every other key needs a
// restart, and the reloader logs it by its key path when it changed.
var (
	// ReloadOperatorKeys name the operators, read again (turning mutations
	// on or off still needs a restart).
	ReloadOperatorKeys = []string{"api.tokens_file", "api.token_file", "api.token_env"}
	// ReloadCertificateKeys name the certificates, keys and CAs of the API
	// and of the etcd client, swapped for the next handshakes (adding or
	// removing a file, or TLS itself, still needs a restart).
	ReloadCertificateKeys = []string{"api.tls.cert_file", "api.tls.key_file", "api.tls.client_ca_file", "api.tls.ca_file",
		"etcd.tls.cert_file", "etcd.tls.key_file", "etcd.tls.ca_file"}
	// ReloadLogKeys name the level of the next log record.
	ReloadLogKeys = []string{"log.level"}
)

// ReloadableKeys returns every key a reload applies.
func ReloadableKeys() []string {
	return append(append(append([]string(nil), ReloadOperatorKeys...), ReloadCertificateKeys...), ReloadLogKeys...)
}

// Reloadable reports whether a reload applies the key at path (a key
// path as Changed names it, list indexes and all): true when one of
// ReloadableKeys is the path, or a prefix of it ending in ".".
func Reloadable(path string) bool {
	for _, k := range ReloadableKeys() {
		if path == k || strings.HasSuffix(k, ".") && strings.HasPrefix(path, k) {
			return true
		}
	}
	return false
}

// Key is one key of the file, as the reference lists it.
type Key struct {
	// Path as the reference spells it: "etcd.tls.ca_file",
	// "workflows[].tasks[].on_interrupt.backoff.kind".
	Path string
	// ID is its entry in Keys: "TLS.ca_file".
	ID string
	// Type is the field's Go type (a pointer's element).
	Type reflect.Type
	KeyDoc
}

// Reference walks the model from Config by reflection and returns every
// key of the file (every field with a yaml name), in the model's order,
// a mapping before its keys; an error names each field without an entry
// in Keys and each entry without a field.
func Reference() ([]Key, error) {
	var out []Key
	var errs []error
	used := map[string]bool{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			k := Key{Path: join(prefix, name), ID: t.Name() + "." + name, Type: f.Type}
			if k.Type.Kind() == reflect.Pointer {
				k.Type = k.Type.Elem()
			}
			doc, ok := Keys[k.ID]
			if !ok {
				errs = append(errs, fmt.Errorf("%s (%s.%s): no entry %q in configs.Keys", k.Path, t.Name(), f.Name, k.ID))
			}
			used[k.ID] = true
			k.KeyDoc = doc
			out = append(out, k)
			switch {
			case k.Type.Kind() == reflect.Struct:
				walk(k.Type, k.Path)
			case k.Type.Kind() == reflect.Slice && k.Type.Elem().Kind() == reflect.Struct:
				walk(k.Type.Elem(), k.Path+"[]")
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	for _, id := range slices.Sorted(maps.Keys(Keys)) {
		if !used[id] {
			errs = append(errs, fmt.Errorf("configs.Keys[%q]: no such key in the model", id))
		}
	}
	return out, errors.Join(errs...)
}

// required is DefaultText of a key every file gives.
const required = "required"

// Keys documents every key of the file, by the Go type that holds it and
// its yaml name ("Node.heartbeat_interval"): a policy's keys are
// documented once for on_interrupt and on_failure. A field of the model
// without an entry, or an entry without a field, fails configdoc and
// TestEveryKeyIsDocumented.
var Keys = map[string]KeyDoc{
	"Config.node":      {Doc: "this node: its name, heartbeat, shutdown and state directory"},
	"Config.database":  {Doc: "the PostgreSQL connection (the engine's database, which holds the sidecar's own schema too)", Rule: "exactly one of `dsn_file` and `dsn_env`"},
	"Config.etcd":      {Doc: "the etcd cluster the master is elected in"},
	"Config.health":    {Doc: "CheckEngineHealth, the master's periodic pass over the nodes and their instances"},
	"Config.recovery":  {Doc: "repairs of interrupted instances"},
	"Config.failover":  {Doc: "the failover grades of nodes (`NORMAL`, `WARNING`, `ERROR`); see [failover-grades.md](failover-grades.md)"},
	"Config.api":       {Doc: "the HTTP API, its TLS and its operators; see [security.md](security.md)"},
	"Config.log":       {Doc: "logging"},
	"Config.workflows": {Doc: "the engine's instance tables, their claims tables and state tasks; table and column names are checked against the database at start-up", DefaultText: "none"},

	"Node.name":                   {Doc: "the name of this node's record", DefaultText: "the hostname", Rule: "letters, digits, `.`, `_`, `-`; starts with a letter or digit; at most 63 characters"},
	"Node.heartbeat_interval":     {Doc: "how often this node sets its `last_active` (on the database's clock)", Default: nodes.DefaultHeartbeatInterval, Min: minHeartbeatInterval, Max: maxHeartbeatInterval},
	"Node.shutdown_timeout":       {Doc: "the bound of a clean shutdown (resign, delete the record)", Default: DefaultShutdownTimeout, Min: minShutdownTimeout, Max: maxShutdownTimeout},
	"Node.state_dir":              {Doc: "where this node records its etcd lease (the file `" + leasefile.Name + "`), which `enginehealth release-lease` (the unit's `ExecStopPost=`) reads to revoke the lease of a daemon whose process is gone, so that the next master takes office at once instead of after `etcd.lease_ttl`; see [Fast failover after a crash](operations.md#fast-failover-after-a-crash)", DefaultText: "`$STATE_DIRECTORY` (systemd's `StateDirectory=`), else none: no lease file, a crashed master is replaced after its lease's TTL", Rule: "an absolute path"},
	"Node.on_unexpected_shutdown": {Doc: "when a restart finds the record of a run that did not shut down cleanly: `ack` keeps the node in `Unexpected shutdown`, out of service, until `enginehealth node ack`; `recover` logs it and lets the node recover like a new one", Default: nodes.DefaultOnUnexpectedShutdown, Values: unexpectedShutdowns},

	"Database.dsn_file":          {Doc: "a file holding the DSN (a `postgres://` URL or `key=value` pairs), a secret: never logged but with its password replaced"},
	"Database.dsn_env":           {Doc: "an environment variable holding the DSN"},
	"Database.schema":            {Doc: "the schema of the sidecar's own tables, created by `enginehealth migrate` and at start-up", Default: pgdb.DefaultSchema, Rule: "an SQL identifier; not a system schema (`pg_*`, `information_schema`)"},
	"Database.statement_timeout": {Doc: "`statement_timeout` of every session of the daemon", Default: pgdb.DefaultStatementTimeout, Min: minStatementTimeout, Max: maxStatementTimeout},
	"Database.connect_timeout":   {Doc: "the bound of one connection attempt, and of each network read after a query is cancelled", Default: pgdb.DefaultConnectTimeout, Min: minConnectTimeout, Max: maxConnectTimeout},
	"Database.max_open_conns":    {Doc: "the size of the connection pool", Default: pgdb.DefaultMaxOpenConns, Min: minOpenConns, Max: maxOpenConns},

	"Etcd.endpoints":          {Doc: "the seeds: the members of the etcd cluster (`host:port` or a URL) the client starts from; list every member, so that the node starts while one is down. With `auto_sync_interval` the node then learns the cluster's members from them and follows a member replaced (see [Replacing an etcd member](operations.md#replacing-an-etcd-member)); an endpoint that does not answer at start is a warning in the log", DefaultText: required, Rule: "each with a host and a port, listed once; one endpoint is a warning"},
	"Etcd.prefix":             {Doc: "the prefix of the election keys", Default: leader.DefaultPrefix, Rule: "starts and ends with `/`"},
	"Etcd.lease_ttl":          {Doc: "the TTL of the master's lease: a killed master is replaced within about this time", Default: leader.DefaultLeaseTTL, Min: leader.MinLeaseTTL, Max: maxLeaseTTL, Rule: "whole seconds"},
	"Etcd.trust_margin":       {Doc: "the master acts only while its last keep-alive is younger than `lease_ttl` − `trust_margin`", Default: leader.DefaultTrustMargin, Min: time.Duration(0), MinOpen: true, Rule: "`lease_ttl` − `trust_margin` > `lease_ttl`/3 (a trust window not longer than 1s + `lease_ttl`/3 is a warning)"},
	"Etcd.dial_timeout":       {Doc: "the bound of one connection attempt", Default: leader.DefaultDialTimeout, Min: minDialTimeout, Max: maxDialTimeout},
	"Etcd.auto_sync_interval": {Doc: "how often the client asks the cluster for its members and uses their client URLs in place of the endpoints it has (learners and members not started yet are skipped; a change is logged once as `etcd endpoints changed`); `0` keeps `endpoints` for good: set it when the members' advertised client URLs are not what this node must dial (a proxy or a load balancer in front of etcd)", Default: DefaultAutoSyncInterval, Min: minAutoSyncInterval, Max: maxAutoSyncInterval, Rule: "or `0`, off"},
	"Etcd.tls":                {Doc: "TLS to etcd (TLS 1.2 at least): an endpoint without a scheme is then `https`, an `http://` one an error; absent, plain HTTP. Files are checked at load and their expiry watched; see [security.md](security.md)", DefaultText: "no TLS"},
	"Etcd.username":           {Doc: "the etcd user (etcd auth enabled), with read and write on `prefix`", Rule: "needs one of `password_file` and `password_env`"},
	"Etcd.password_file":      {Doc: "a file holding the user's password", Rule: "only with `username`; not with `password_env`"},
	"Etcd.password_env":       {Doc: "an environment variable holding the user's password", Rule: "only with `username`; not with `password_file`"},

	"TLS.ca_file":     {Doc: "the CA that verifies the members' certificates (PEM)", DefaultText: "the system's roots"},
	"TLS.cert_file":   {Doc: "the client certificate, for members that ask for one (PEM)", Rule: "with `key_file`"},
	"TLS.key_file":    {Doc: "the client certificate's unencrypted key (PEM)", Rule: "with `cert_file`"},
	"TLS.server_name": {Doc: "the name the members' certificates must be for", DefaultText: "each endpoint's host", Rule: "an IP address or a DNS name"},

	"Health.schedule":                  {Doc: "when the master runs CheckEngineHealth (robfig/cron: five fields, or `@every DURATION`)", Default: health.DefaultSchedule, Rule: "fires at most once a second"},
	"Health.not_responding_after":      {Doc: "a node whose `last_active` is older is marked `Not responding`", Default: health.DefaultNotRespondingAfter, Min: time.Duration(0), MinOpen: true, Max: maxNotRespondingAfter, Rule: atLeastBeats("node.heartbeat_interval")},
	"Health.forget_after":              {Doc: "records unresponsive for longer are deleted", Default: health.DefaultForgetAfter, Min: time.Duration(0), MinOpen: true, Max: maxForgetAfter, Rule: "longer than `not_responding_after`"},
	"Health.max_unresponsive_fraction": {Doc: "the disruption guard: with more than 2 nodes, if at least this fraction would go unresponsive in one pass, the master assumes it is the one cut off and does nothing that pass", Default: health.DefaultMaxUnresponsiveFraction, Min: 0.0, MinOpen: true, Max: 1.0},
	"Health.sweep_interval":            {Doc: "how often a pass *sweeps*: looks for every instance left interim, also those without any claim (claims deleted by hand, an engine that broke the protocol); see [CheckEngineHealth](design.md#checkenginehealth)", Default: health.DefaultSweepInterval, DefaultText: "one period of `schedule` when that is longer", Min: minSweepInterval, Max: maxSweepInterval, Rule: "at least one period of `schedule`; at most that period when it is longer than the maximum"},

	"Recovery.batch_size": {Doc: "instances repaired per transaction (chosen from `BenchmarkRepair`: see [benchmarks.md](benchmarks.md#the-repair-ratio)); also the claims expired, due retries moved and holds decided per transaction. The check's settle step, which writes only the sidecar's rows and locks no instance, settles `batch_size` cases per transaction but at least 1,000, so a small `batch_size` does not make each pass settle its open cases one at a time", Default: recovery.DefaultBatchSize, Min: minBatchSize, Max: maxBatchSize},

	"Failover.window":             {Doc: "a second interruption of a `WARNING` node's work, on another instance, within this window makes the node `ERROR`", Default: nodes.DefaultGradeWindow, Min: minGradePeriod, Max: maxGradePeriod},
	"Failover.quiet_period":       {Doc: "a node without interruptions (and grade changes) for this long is `NORMAL` again", Default: nodes.DefaultQuietPeriod, Min: minGradePeriod, Max: maxGradePeriod},
	"Failover.max_error_fraction": {Doc: "at most this fraction of the node records is `ERROR` at once; `0` is a setting (never `ERROR`)", Default: nodes.DefaultMaxErrorFraction, Min: 0.0, Max: 1.0},
	"Failover.error_not_ready":    {Doc: "`/readyz` answers 503 while this node is `ERROR`, so that an engine unit waiting for it is not started", Default: false},

	"API.listen":      {Doc: "the HTTP listener (`host:port`; port 0 picks a free port)", Default: DefaultListen},
	"API.advertise":   {Doc: "the address other nodes and the CLI reach this node at (`host:port`, or `https://host:port` with `tls`, which a bare one gets too)", DefaultText: "the address bound", Rule: "required when `listen` binds every address (`0.0.0.0:8642`, `[::]:8642`, `:8642`); not an unspecified address"},
	"API.tokens_file": {Doc: "the operators: a YAML list of `{name, sha256, role}`, the SHA-256 of each one's bearer token, role `read` or `operate`; see [security.md](security.md)"},
	"API.token_file":  {Doc: "a file holding one bearer token, the operator named `operator` with role `operate`; with none of `tokens_file`, `token_file` and `token_env`, mutations are off", Rule: "not with `tokens_file` or `token_env`; visible ASCII, at most 1,024 characters (fewer than 16 is a warning)"},
	"API.token_env":   {Doc: "an environment variable holding that one bearer token", Rule: "not with `tokens_file` or `token_file`"},
	"API.auth_reads":  {Doc: "every read (`GET /v1/*`, the status page) needs a token of either role; `/healthz`, `/readyz`, `/metrics` and `/v1/leader?local=true` stay open", Default: false, Rule: "needs `tokens_file`, `token_file` or `token_env`"},
	"API.session_ttl": {Doc: "how long an operator's console session (`/console`, signed in with a token) lasts after its sign-in; sessions live in this node's memory and end with it", Default: DefaultSessionTTL, Min: minSessionTTL, Max: maxSessionTTL},
	"API.tls":         {Doc: "serve the API over HTTPS (TLS 1.2 at least); files are checked at load and their expiry watched", DefaultText: "plain HTTP"},

	"APITLS.cert_file":      {Doc: "this node's certificate (PEM); under `client_auth: require` also its client certificate when it forwards to the master", DefaultText: required},
	"APITLS.key_file":       {Doc: "the certificate's key (PEM)", DefaultText: required},
	"APITLS.client_ca_file": {Doc: "the CA that verifies client certificates (a verified certificate's CN is a reader's name)"},
	"APITLS.client_auth":    {Doc: "whether clients present a certificate: `none` (not asked), `request` (verified when given), `require` (every connection)", DefaultText: "`require` with `client_ca_file`, else `none`", Values: clientAuths, Rule: "`request` and `require` need `client_ca_file`"},
	"APITLS.ca_file":        {Doc: "the CA that verifies the other nodes' certificates when this node talks to them", DefaultText: "`client_ca_file`, else the system's roots"},

	"Log.format": {Doc: "`auto`: colored text on a terminal, JSON otherwise", Default: DefaultLogFormat, Values: logFormats},
	"Log.level":  {Doc: "the lowest level logged", Default: DefaultLogLevel, Values: logLevels},

	"Workflow.name":           {Doc: "the workflow's name", DefaultText: required, Rule: "letters, digits, `.`, `_`, `-`; starts with a letter or digit; at most 63 characters; unique"},
	"Workflow.table":          {Doc: "the instance table, optionally schema-qualified; names are quoted as written, so case matters (`App.Orders` is not `app.orders`)", DefaultText: required, Rule: "one workflow per table and status column; the table and its schema each a plain SQL identifier (letters, digits, `_` and `$`, not beginning with a digit, at most 63 bytes): no spaces, dots or quotes inside a name"},
	"Workflow.id_column":      {Doc: "the instances' id column", DefaultText: required},
	"Workflow.status_column":  {Doc: "the instances' state column", DefaultText: required},
	"Workflow.error_column":   {Doc: "the instances' error text, matched by `non_retryable` patterns"},
	"Workflow.updated_column": {Doc: "a timestamp the engine sets on every state change: new failures are found by it", Rule: "required by an `on_failure` policy other than `none`"},
	"Workflow.claimable":      {Doc: "the workflow's engines take claims ([claim-protocol.md](claim-protocol.md)), and the periodic check repairs it; others are repaired only by start-up recovery on a cold cluster", Default: false},
	"Workflow.claims":         {Doc: "the claims table of a claimable workflow", Rule: "required exactly when `claimable` is true"},
	"Workflow.tasks":          {Doc: "the workflow's state tasks", DefaultText: required, Rule: "at least one; a state is the interim state of at most one task, and no other task begins, ends or fails in it"},

	"Claim.table":             {Doc: "the claims table, optionally schema-qualified; quoted as written, as `table` is", DefaultText: required, Rule: "as the workflow's `table`"},
	"Claim.instance_column":   {Doc: "the claimed instance's id", Default: DefaultInstanceColumn},
	"Claim.node_column":       {Doc: "the claiming node's name", Default: DefaultNodeColumn},
	"Claim.token_column":      {Doc: "the claim's token", Default: DefaultTokenColumn},
	"Claim.claimed_at_column": {Doc: "when the claim was taken", Default: DefaultClaimedAtColumn},
	"Claim.expires_at_column": {Doc: "when the claim expires", Default: DefaultExpiresAtColumn},

	"Task.name":            {Doc: "the task's name", DefaultText: required, Rule: "letters, digits, `.`, `_`, `-`; starts with a letter or digit; at most 63 characters; unique in the workflow"},
	"Task.begin":           {Doc: "the state the task starts from", DefaultText: required, Rule: "printable, at most 255 bytes; `begin`, `interim`, `end`/`ends` and `failed` distinct"},
	"Task.interim":         {Doc: "the state while the task runs: an instance left in it was interrupted", DefaultText: required},
	"Task.end":             {Doc: "the state the task ends in", DefaultText: "required (or `ends`)"},
	"Task.ends":            {Doc: "the states a branching task ends in", Rule: "not with `end`"},
	"Task.failed":          {Doc: "the state of an instance the task failed", DefaultText: required},
	"Task.atomic_internal": {Doc: "the task's whole effect is one database transaction: an interrupted run is reverted to `begin`", Default: false},
	"Task.claim_timeout":   {Doc: "the expiry of a claim on this task (engines renew long tasks); claimable workflows only", Default: claims.DefaultTimeout, Min: minClaimTimeout, Max: maxClaimTimeout},
	"Task.on_interrupt":    {Doc: "what becomes of an instance found interrupted; see [retry-policies.md](retry-policies.md)", DefaultText: "`atomic_internal`: `retry`, `fixed` 0s, `max_attempts: " + strconv.Itoa(recovery.DefaultAtomicMaxAttempts) + "`; else `none` (→ `failed`)"},
	"Task.on_failure":      {Doc: "what becomes of an instance the engine failed; see [retry-policies.md](retry-policies.md)", DefaultText: "`none`", Rule: "other than `none`: needs `updated_column`, and a `failed` state no other task of the workflow has"},

	"Policy.strategy":      {Doc: "`none`: the instance fails (→ `failed`); `retry`: back to `begin` after a delay, at most `max_attempts` times; `hold`: parked for an operator", Default: recovery.DefaultStrategy, Values: strategies},
	"Policy.max_attempts":  {Doc: "retries after the original execution (attempt 0)", Default: recovery.DefaultMaxAttempts, DefaultText: "with `kind: schedule`, the schedule's length", Min: 1, Max: maxAttempts, Rule: "with `kind: schedule`, at most the schedule's length"},
	"Policy.backoff":       {Doc: "the delay before a retry"},
	"Policy.non_retryable": {Doc: "regular expressions matched (by PostgreSQL) against the workflow's `error_column`: a match fails the instance at once", Rule: "needs `error_column`; a pattern that matches every text is refused"},

	"Backoff.kind":       {Doc: "how the delay grows with the attempts", Default: recovery.DefaultBackoffKind, Values: backoffKinds},
	"Backoff.base":       {Doc: "the first delay; `0s` is a setting (a retry at once)", Default: recovery.DefaultBackoffBase, Min: time.Duration(0), Max: maxBackoffDelay, Rule: "not below " + minBackoffDelay.String() + " but `0s`"},
	"Backoff.max_delay":  {Doc: "caps every delay", Default: recovery.DefaultBackoffMaxDelay, Min: minBackoffDelay, Max: maxBackoffDelay, Rule: "at least `base` and every `schedule` entry"},
	"Backoff.jitter":     {Doc: "each delay is scaled by 1 ± jitter; `0` is a setting (off)", Default: recovery.DefaultJitterOf(recovery.DefaultBackoffKind), DefaultText: "0 for `randomized_exponential` and `schedule`", Min: 0.0, Max: 1.0, MaxOpen: true},
	"Backoff.multiplier": {Doc: "the growth of each delay", Default: recovery.DefaultRandomizedMultiplier, Min: 1.0, MinOpen: true, Max: float64(maxMultiplier), Rule: "`exponential` and `randomized_exponential` only"},
	"Backoff.schedule":   {Doc: "the delays of the retries, one by one", Min: minBackoffDelay, Max: maxBackoffDelay, Rule: "required by, and only with, `kind: schedule`"},
}

// atLeastBeats is the rule of a staleness bound: enough heartbeats that
// one late one condemns no live node.
func atLeastBeats(key string) string {
	return "at least " + strconv.Itoa(nodes.LiveBeats) + " × `" + key + "`"
}
