package configs

import (
	"bytes"
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/claims"
	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/infra/tlsfiles"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Path is the key path, e.g. "workflows[1].tasks[0].interim".
	Path string
	// Line in the file, 0 when unknown.
	Line int
	Msg  string
}

// String returns the problem as "path: message (line n)", leaving out the
// path and line when they are unknown.
func (p Problem) String() string {
	s := p.Msg
	if p.Path != "" {
		s = p.Path + ": " + p.Msg
	}
	if p.Line > 0 {
		s += fmt.Sprintf(" (line %d)", p.Line)
	}
	return s
}

// Error lists every problem found in a configuration file.
type Error struct {
	File     string
	Problems []Problem
}

// Error names the file and lists its problems, one a line when there are
// several.
func (e *Error) Error() string {
	var b strings.Builder
	if len(e.Problems) == 1 {
		fmt.Fprintf(&b, "config %s: %s", pathText(e.File), e.Problems[0])
		return b.String()
	}
	fmt.Fprintf(&b, "config %s: %d problems:", pathText(e.File), len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Load reads, defaults, resolves and validates the configuration file at
// path. Secrets are read from the files or environment variables it names.
// The returned error is an *Error listing every problem.
func Load(path string) (*Config, error) {
	return load(path, allSecrets)
}

// LoadDatabase is Load for commands that use the database alone
// (enginehealth migrate): the whole file is read and checked, but of the
// secrets only the database's are resolved, so that an operator's shell
// without the service's API token or etcd password in its environment can
// run them. The API, TLS and etcd credentials of the result are empty.
func LoadDatabase(path string) (*Config, error) {
	return load(path, databaseSecrets)
}

// LoadEtcd is Load for commands that use etcd alone (enginehealth
// release-lease): the whole file is read and checked, but of the secrets
// only etcd's are resolved (its TLS files and its user's password), so
// that they run without the DSN or the API's secrets. The database's
// DSN, the API token, operators and TLS of the result are empty.
func LoadEtcd(path string) (*Config, error) {
	return load(path, etcdSecrets)
}

// LoadState is Load without any secret resolved, for what needs none: the
// node's name, etcd's prefix and the state directory (release-lease's
// first look: with no lease file left it has nothing to do, even where
// the secrets cannot be read, as under ExecStopPost=). The secrets of the
// result are empty.
func LoadState(path string) (*Config, error) {
	return load(path, noSecrets)
}

// load reads the file at path and parses it, resolving the secrets of set.
func load(path string, set secretSet) (*Config, error) {
	data, err := readFile(path, MaxConfigBytes)
	if err != nil {
		return nil, &Error{File: path, Problems: []Problem{{Path: docPath, Msg: fmt.Sprintf("cannot read: %v", err)}}}
	}
	return parse(data, path, os.LookupEnv, set)
}

// Parse is Load on bytes already read; path names the file in messages and
// anchors relative secret file paths. lookupEnv resolves *_env keys.
func Parse(data []byte, path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	return parse(data, path, lookupEnv, allSecrets)
}

// Which secrets parse resolves.
type secretSet int

const (
	allSecrets      secretSet = iota
	databaseSecrets           // the DSN alone (LoadDatabase)
	etcdSecrets               // etcd's TLS files and password alone (LoadEtcd)
	noSecrets                 // none (LoadState)
)

// parse is Parse, resolving only the secrets of set.
func parse(data []byte, path string, lookupEnv func(string) (string, bool), set secretSet) (*Config, error) {
	fail := func(p Problem) (*Config, error) { return nil, &Error{File: path, Problems: []Problem{p}} }
	if len(data) > MaxConfigBytes {
		return fail(Problem{Path: docPath, Msg: fmt.Sprintf("%d bytes, more than the limit of %d", len(data), MaxConfigBytes)})
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a byte order mark is not part of the first key
	if p := checkShape(data); p != nil {
		return fail(*p)
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return fail(syntaxProblem(data, err))
	}
	v := &validator{file: file}
	var cfg Config
	var body ast.Node
	for _, doc := range file.Docs {
		if doc.Body == nil {
			continue
		}
		if body != nil {
			v.addAt(docPath, line(doc.Body), "a second YAML document: the configuration is one document")
			break
		}
		body = doc.Body
	}
	dec := &decoder{v: v}
	dec.decode(body, reflect.ValueOf(&cfg).Elem(), "")
	cfg.Path = path
	cfg.idlePolicyKeys(v)
	cfg.applyDefaults()
	dec.explicitZeros()
	switch set {
	case databaseSecrets:
		cfg.Database.DSN = v.secret("database", "dsn", cfg.Database.DSNFile, cfg.Database.DSNEnv, true, filepath.Dir(path), lookupEnv)
	case etcdSecrets:
		cfg.resolveEtcd(v, filepath.Dir(path), lookupEnv)
	case noSecrets:
	default:
		cfg.resolveSecrets(v, filepath.Dir(path), lookupEnv)
	}
	cfg.resolveStateDir(lookupEnv)
	cfg.validate(v)
	if v.dropped > 0 {
		v.problems = append(v.problems, Problem{Path: docPath, Msg: fmt.Sprintf("%d more problems not listed (the first %d are)", v.dropped, maxProblems)})
	}
	if len(v.problems) > 0 {
		return nil, &Error{File: path, Problems: v.problems}
	}
	cfg.Warnings = v.warnings
	cfg.files = v.files
	return &cfg, nil
}

// syntaxProblem turns a parser error into a Problem at its line, with the
// key path that encloses it.
func syntaxProblem(data []byte, err error) Problem {
	p := yamlProblem(nil, err)
	if len(p.Msg) > 300 {
		p.Msg = p.Msg[:300] + "…"
	}
	p.Msg = "YAML syntax: " + p.Msg
	if p.Path == "" {
		p.Path = pathAtLine(data, max(p.Line, 1))
	}
	return p
}

// yamlProblem turns a parser or decoder error into a Problem carrying the
// key path and line of the token it blames.
func yamlProblem(file *ast.File, err error) Problem {
	var yerr yaml.Error
	if !errors.As(err, &yerr) {
		return Problem{Msg: err.Error()}
	}
	p := Problem{Msg: yerr.GetMessage()}
	if tk := yerr.GetToken(); tk != nil {
		if tk.Position != nil {
			p.Line = tk.Position.Line
		}
		p.Path = pathOfToken(file, tk)
	}
	return p
}

// pathOfToken finds the key path of the node that owns tk.
func pathOfToken(file *ast.File, tk *token.Token) string {
	if file == nil {
		return ""
	}
	f := &tokenFinder{tk: tk}
	for _, doc := range file.Docs {
		ast.Walk(f, doc)
	}
	return trimPath(f.path)
}

type tokenFinder struct {
	tk   *token.Token
	path string
}

func (f *tokenFinder) Visit(n ast.Node) ast.Visitor {
	if f.path == "" && n.GetToken() == f.tk {
		f.path = n.GetPath()
	}
	return f
}

func trimPath(p string) string {
	p = strings.TrimPrefix(p, "$")
	return strings.TrimPrefix(p, ".")
}

// lineOf returns the line of the key at path, or 0.
func lineOf(file *ast.File, path string) int {
	if file == nil || path == "" {
		return 0
	}
	yp, err := yaml.PathString("$." + path)
	if err != nil {
		return 0
	}
	n, err := yp.FilterFile(file)
	if err != nil || n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

func (c *Config) applyDefaults() {
	c.Node.HeartbeatInterval = cmp.Or(c.Node.HeartbeatInterval, nodes.DefaultHeartbeatInterval)
	c.Node.ShutdownTimeout = cmp.Or(c.Node.ShutdownTimeout, DefaultShutdownTimeout)
	c.Node.OnUnexpectedShutdown = cmp.Or(c.Node.OnUnexpectedShutdown, nodes.DefaultOnUnexpectedShutdown)
	c.Database.Schema = cmp.Or(c.Database.Schema, pgdb.DefaultSchema)
	c.Database.StatementTimeout = cmp.Or(c.Database.StatementTimeout, pgdb.DefaultStatementTimeout)
	c.Database.ConnectTimeout = cmp.Or(c.Database.ConnectTimeout, pgdb.DefaultConnectTimeout)
	c.Database.MaxOpenConns = cmp.Or(c.Database.MaxOpenConns, pgdb.DefaultMaxOpenConns)
	c.Etcd.Prefix = cmp.Or(c.Etcd.Prefix, leader.DefaultPrefix)
	c.Etcd.LeaseTTL = cmp.Or(c.Etcd.LeaseTTL, leader.DefaultLeaseTTL)
	c.Etcd.TrustMargin = cmp.Or(c.Etcd.TrustMargin, leader.DefaultTrustMargin)
	c.Etcd.DialTimeout = cmp.Or(c.Etcd.DialTimeout, leader.DefaultDialTimeout)
	if c.Etcd.AutoSyncInterval == nil {
		d := DefaultAutoSyncInterval
		c.Etcd.AutoSyncInterval = &d
	}
	c.Health.Schedule = cmp.Or(c.Health.Schedule, health.DefaultSchedule)
	c.Health.NotRespondingAfter = cmp.Or(c.Health.NotRespondingAfter, health.DefaultNotRespondingAfter)
	c.Health.ForgetAfter = cmp.Or(c.Health.ForgetAfter, health.DefaultForgetAfter)
	c.Health.MaxUnresponsiveFraction = cmp.Or(c.Health.MaxUnresponsiveFraction, health.DefaultMaxUnresponsiveFraction)
	if c.Health.SweepInterval == 0 {
		// 10m, or one period of a longer schedule (a sweep comes with a
		// pass); a schedule that does not parse is reported by validate.
		c.Health.SweepInterval = health.DefaultSweepInterval
		if sched, err := health.ParseSchedule(c.Health.Schedule); err == nil {
			c.Health.SweepInterval = max(c.Health.SweepInterval, sched.Period())
		}
	}
	c.Recovery.BatchSize = cmp.Or(c.Recovery.BatchSize, recovery.DefaultBatchSize)
	c.Failover.Window = cmp.Or(c.Failover.Window, nodes.DefaultGradeWindow)
	c.API.SessionTTL = cmp.Or(c.API.SessionTTL, DefaultSessionTTL)
	c.Failover.QuietPeriod = cmp.Or(c.Failover.QuietPeriod, nodes.DefaultQuietPeriod)
	if c.Failover.MaxErrorFraction == nil {
		f := nodes.DefaultMaxErrorFraction
		c.Failover.MaxErrorFraction = &f
	}
	c.API.Listen = cmp.Or(c.API.Listen, DefaultListen)
	c.Log.Format = cmp.Or(c.Log.Format, DefaultLogFormat)
	c.Log.Level = cmp.Or(c.Log.Level, DefaultLogLevel)
	for i := range c.Workflows {
		w := &c.Workflows[i]
		if w.Claims != nil {
			w.Claims.InstanceColumn = cmp.Or(w.Claims.InstanceColumn, DefaultInstanceColumn)
			w.Claims.NodeColumn = cmp.Or(w.Claims.NodeColumn, DefaultNodeColumn)
			w.Claims.TokenColumn = cmp.Or(w.Claims.TokenColumn, DefaultTokenColumn)
			w.Claims.ClaimedAtColumn = cmp.Or(w.Claims.ClaimedAtColumn, DefaultClaimedAtColumn)
			w.Claims.ExpiresAtColumn = cmp.Or(w.Claims.ExpiresAtColumn, DefaultExpiresAtColumn)
		}
		for j := range w.Tasks {
			t := &w.Tasks[j]
			t.ClaimTimeout = cmp.Or(t.ClaimTimeout, claims.DefaultTimeout)
			t.applyPolicyDefaults()
		}
	}
}

// idlePolicyKeys warns of policy keys that the policy's strategy never
// uses (retries and delays of a hold or none policy): valid, but what
// the file says is not what happens. Call it before the defaults fill
// them in.
func (c *Config) idlePolicyKeys(v *validator) {
	for i, w := range c.Workflows {
		for j, t := range w.Tasks {
			for _, pol := range []struct {
				key string
				p   *Policy
			}{{"on_interrupt", t.OnInterrupt}, {"on_failure", t.OnFailure}} {
				p := pol.p
				if p == nil {
					continue
				}
				if pol.key == "on_interrupt" && t.AtomicInternal && p.Strategy == "" {
					// Written, the policy replaces the atomic default
					// (retry at once), and without a strategy it is none.
					v.warn(fmt.Sprintf("workflows[%d].tasks[%d].on_interrupt", i, j),
						"no strategy: none, an interrupted instance fails at once; leave on_interrupt out for an atomic task's default (retry at once, up to %d times)", recovery.DefaultAtomicMaxAttempts)
				}
				strategy := cmp.Or(p.Strategy, recovery.DefaultStrategy)
				if strategy == recovery.StrategyRetry {
					continue
				}
				b := p.Backoff
				if p.MaxAttempts != 0 || b.Kind != "" || b.Base != nil || b.MaxDelay != 0 || b.Jitter != nil || b.Multiplier != 0 || b.Schedule != nil {
					v.warn(fmt.Sprintf("workflows[%d].tasks[%d].%s", i, j, pol.key),
						"strategy %s never retries: max_attempts and backoff are not used", strategy)
				}
			}
		}
	}
}

// applyPolicyDefaults sets the task's policies that are not configured
// (an atomic_internal task's on_interrupt: recovery.AtomicOnInterrupt)
// and the unset fields of the others, in place.
func (t *Task) applyPolicyDefaults() {
	if t.OnInterrupt == nil && t.AtomicInternal {
		t.OnInterrupt = policyOf(recovery.AtomicOnInterrupt())
	}
	t.OnInterrupt = t.OnInterrupt.applyDefaults()
	t.OnFailure = t.OnFailure.applyDefaults()
}

// applyDefaults sets every unset field of p (a new empty policy when nil)
// to its default and returns p.
func (p *Policy) applyDefaults() *Policy {
	if p == nil {
		p = &Policy{}
	}
	q := p
	q.Strategy = cmp.Or(q.Strategy, recovery.DefaultStrategy)
	b := &q.Backoff
	b.Kind = cmp.Or(b.Kind, recovery.DefaultBackoffKind)
	if b.Kind == recovery.BackoffSchedule && q.MaxAttempts == 0 {
		q.MaxAttempts = len(b.Schedule)
	}
	q.MaxAttempts = cmp.Or(q.MaxAttempts, recovery.DefaultMaxAttempts)
	if b.Base == nil {
		b.Base = ptr(recovery.DefaultBackoffBase)
	}
	b.MaxDelay = cmp.Or(b.MaxDelay, recovery.DefaultBackoffMaxDelay)
	if b.Jitter == nil {
		b.Jitter = ptr(recovery.DefaultJitterOf(b.Kind))
	}
	if b.Kind == recovery.BackoffExponential || b.Kind == recovery.BackoffRandomizedExponential {
		b.Multiplier = cmp.Or(b.Multiplier, recovery.DefaultRandomizedMultiplier)
	}
	return q
}

// policyOf is the file's form of a recovery policy.
func policyOf(r recovery.Policy) *Policy {
	return &Policy{Strategy: r.Strategy, MaxAttempts: r.MaxAttempts, NonRetryable: r.NonRetryable,
		Backoff: Backoff{Kind: r.Backoff.Kind, Base: ptr(r.Backoff.Base), MaxDelay: r.Backoff.MaxDelay,
			Jitter: ptr(r.Backoff.Jitter), Multiplier: r.Backoff.Multiplier, Schedule: r.Backoff.Schedule}}
}

func ptr[T any](v T) *T { return &v }

// resolveSecrets reads the DSN, the API token and the etcd password from
// their files or environment variables, the operators' token hashes, and
// loads the etcd TLS files.
func (c *Config) resolveSecrets(v *validator, dir string, lookupEnv func(string) (string, bool)) {
	c.Database.DSN = v.secret("database", "dsn", c.Database.DSNFile, c.Database.DSNEnv, true, dir, lookupEnv)
	c.API.Token = v.secret("api", "token", c.API.TokenFile, c.API.TokenEnv, false, dir, lookupEnv)
	c.resolveOperators(v, dir, lookupEnv)
	c.resolveAPITLS(v, dir, lookupEnv)
	c.resolveEtcd(v, dir, lookupEnv)
}

// resolveEtcd loads the etcd TLS files and reads the etcd user's password.
func (c *Config) resolveEtcd(v *validator, dir string, lookupEnv func(string) (string, bool)) {
	e := &c.Etcd
	if t := e.TLS; t != nil {
		before := len(v.problems)
		files := tlsfiles.Files{
			CAFile:   v.optionalPath("etcd.tls.ca_file", t.CAFile, dir, lookupEnv),
			CertFile: v.optionalPath("etcd.tls.cert_file", t.CertFile, dir, lookupEnv),
			KeyFile:  v.optionalPath("etcd.tls.key_file", t.KeyFile, dir, lookupEnv),
		}
		client, err := tlsfiles.Client("etcd.tls", files, time.Now())
		switch {
		case len(v.problems) > before:
			// A credential:NAME that names no file: said at its key.
		case err != nil:
			v.addTLS("etcd.tls", err)
		default:
			// Every member verified as server_name (the daemon makes
			// the TLS connections: tlsfiles.GRPCDialer).
			client.Config.ServerName = t.ServerName
			e.ClientTLS, e.ClientCert, e.CAs = client.Config, client.Cert, client.CAs
		}
	}
	if e.TLS == nil && slices.ContainsFunc(e.Endpoints, func(ep string) bool { return strings.HasPrefix(ep, "https://") }) {
		// An https:// endpoint without etcd.tls: TLS, the members
		// verified by the system's roots.
		e.ClientTLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	switch {
	case e.Username != "":
		e.Password = v.secret("etcd", "password", e.PasswordFile, e.PasswordEnv, false, dir, lookupEnv)
		if e.PasswordFile == "" && e.PasswordEnv == "" {
			v.add("etcd.username", "needs its password: set one of etcd.password_file or etcd.password_env")
		}
	case e.PasswordFile != "":
		v.add("etcd.password_file", "set, but etcd.username is not: the password is a user's")
	case e.PasswordEnv != "":
		v.add("etcd.password_env", "set, but etcd.username is not: the password is a user's")
	}
}

// resolveStateDir sets Node.StateDirectory: node.state_dir, else the
// first directory of $STATE_DIRECTORY (systemd's StateDirectory= sets it,
// colon-separated when the unit names several), else none.
func (c *Config) resolveStateDir(lookupEnv func(string) (string, bool)) {
	c.Node.StateDirectory = c.Node.StateDir
	if env, ok := lookupEnv("STATE_DIRECTORY"); ok && c.Node.StateDir == "" {
		first, _, _ := strings.Cut(env, ":")
		c.Node.StateDirectory = first
	}
}

// resolveAPITLS loads api.tls: the server's side, and the client's side
// between nodes.
func (c *Config) resolveAPITLS(v *validator, dir string, lookupEnv func(string) (string, bool)) {
	a := &c.API
	t := a.TLS
	if t == nil {
		return
	}
	if t.ClientAuth == "" {
		t.ClientAuth = ClientAuthNone
		if t.ClientCAFile != "" {
			t.ClientAuth = ClientAuthRequire
		}
	}
	auth, ok := map[string]tls.ClientAuthType{
		ClientAuthNone: tls.NoClientCert, ClientAuthRequest: tls.VerifyClientCertIfGiven, ClientAuthRequire: tls.RequireAndVerifyClientCert,
	}[t.ClientAuth]
	switch {
	case !ok:
		v.add("api.tls.client_auth", "%s: want none, request or require", excerpt(t.ClientAuth))
		return
	case auth != tls.NoClientCert && t.ClientCAFile == "":
		v.add("api.tls.client_auth", "%s needs api.tls.client_ca_file: the CA that verifies the clients' certificates", t.ClientAuth)
		return
	}
	before := len(v.problems)
	files := tlsfiles.ServerFiles{
		CertFile:     v.optionalPath("api.tls.cert_file", t.CertFile, dir, lookupEnv),
		KeyFile:      v.optionalPath("api.tls.key_file", t.KeyFile, dir, lookupEnv),
		ClientCAFile: v.optionalPath("api.tls.client_ca_file", t.ClientCAFile, dir, lookupEnv),
		ClientAuth:   auth,
	}
	caFile := v.optionalPath("api.tls.ca_file", t.CAFile, dir, lookupEnv)
	if len(v.problems) > before {
		return
	}
	// Under require, this node's certificate is also its client
	// certificate when it forwards to the master.
	usage := tlsfiles.ServerAuth
	if auth == tls.RequireAndVerifyClientCert {
		usage |= tlsfiles.ClientAuth
	}
	now := time.Now()
	srv, cert, clientCAs, err := tlsfiles.Server("api.tls", files, usage, now)
	var peerCAs *tlsfiles.CAs
	switch {
	case caFile != "":
		var perr error
		peerCAs, perr = tlsfiles.LoadCAs("api.tls.ca_file", caFile, now)
		err = errors.Join(err, perr)
	case clientCAs != nil:
		peerCAs = clientCAs
	}
	if err != nil {
		v.addTLS("api.tls", err)
		return
	}
	a.ServerTLS, a.ServerCert, a.ClientCAs, a.PeerCAs = srv, cert, clientCAs, peerCAs
	// Other nodes and the CLI verify the certificate for the advertised
	// host: one it is not for is refused by all of them.
	if u, perr := url.Parse(a.AdvertiseURL(a.Listen)); perr == nil && u.Hostname() != "" && !isUnspecified(u.Hostname()) {
		if leaf := cert.Load().Leaf; leaf != nil && leaf.VerifyHostname(u.Hostname()) != nil {
			v.warn("api.tls.cert_file", "the certificate (CN %q) is not for %s, the host other nodes and the CLI reach this node at (api.advertise, else api.listen): they will refuse it; add it to the certificate's subjectAltName",
				leaf.Subject.CommonName, excerpt(u.Hostname()))
		}
	}
	// The CAs come from PeerCAs at each dial (tlsfiles.DialFunc).
	a.PeerTLS = &tls.Config{MinVersion: tls.VersionTLS12, GetClientCertificate: cert.GetClientCertificate}
}

// addTLS adds the problems of a tlsfiles error (or of several, joined)
// at their keys; any other error at key.
func (v *validator) addTLS(key string, err error) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var terr *tlsfiles.Error
		switch {
		case e == nil:
		case errors.As(e, &terr):
			for _, p := range terr.Problems {
				v.add(p.Key, "%s", p.Msg)
			}
		default:
			v.add(key, "%v", e)
		}
	}
}

// optionalPath is filePath for a key that may be empty ("" stays "").
func (v *validator) optionalPath(key, file, dir string, lookupEnv func(string) (string, bool)) string {
	if file == "" {
		return ""
	}
	return v.filePath(key, file, dir, lookupEnv)
}

// ReadSecretFile reads a secret (a DSN, a token) from a file: a regular
// file of at most MaxSecretBytes (a FIFO or a device is refused, not waited
// on), one line without a NUL byte, trimmed of surrounding space, not
// empty. The error names the file, never the secret.
func ReadSecretFile(path string) (string, error) {
	data, err := readFile(path, MaxSecretBytes)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(data))
	switch {
	case s == "":
		return "", fmt.Errorf("file %s is empty", pathText(path))
	case strings.ContainsFunc(s, func(r rune) bool { return r == 0 || r == '\n' }):
		return "", fmt.Errorf("file %s holds more than one line or a NUL byte", pathText(path))
	}
	return s, nil
}

func (v *validator) secret(section, name, file, env string, required bool, dir string, lookupEnv func(string) (string, bool)) string {
	fileKey, envKey := section+"."+name+"_file", section+"."+name+"_env"
	switch {
	case file != "" && env != "":
		v.add(envKey, "set only one of %s and %s", fileKey, envKey)
		return ""
	case file != "":
		file = v.filePath(fileKey, file, dir, lookupEnv)
		if file == "" {
			return ""
		}
		s, err := ReadSecretFile(file)
		if err != nil {
			v.add(fileKey, "cannot read %s: %v", name, err)
		}
		return s
	case env != "":
		s, ok := lookupEnv(env)
		s = strings.TrimSpace(s)
		switch {
		case !ok || s == "":
			v.add(envKey, "environment variable %s is not set or empty", pathText(env))
		case len(s) > MaxSecretBytes:
			v.add(envKey, "environment variable %s holds more than %d bytes", pathText(env), MaxSecretBytes)
			return ""
		case strings.ContainsFunc(s, func(r rune) bool { return r == 0 || r == '\n' }):
			v.add(envKey, "environment variable %s holds more than one line or a NUL byte", pathText(env))
			return ""
		}
		return s
	case required:
		v.add(section, "one of %s or %s is required", fileKey, envKey)
	}
	return ""
}

// CredentialPrefix marks a file key's value as the name of a systemd
// credential: "credential:NAME" is the file NAME in the directory
// $CREDENTIALS_DIRECTORY, where systemd puts what LoadCredential= and
// LoadCredentialEncrypted= load for the service.
const CredentialPrefix = "credential:" //nolint:gosec // G101: a prefix naming where a secret is, not a secret

// filePath resolves the value of a *_file key: "credential:NAME" in
// $CREDENTIALS_DIRECTORY, a relative path from dir (the configuration
// file's directory), an absolute path as it is. It returns "" after
// adding a problem at key when the value cannot name a file.
func (v *validator) filePath(key, file, dir string, lookupEnv func(string) (string, bool)) string {
	name, ok := strings.CutPrefix(file, CredentialPrefix)
	if !ok {
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		v.files = append(v.files, file)
		return file
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		v.add(key, "%s: want credential:NAME, NAME a credential's name (no '/')", pathText(file))
		return ""
	}
	credDir, set := lookupEnv("CREDENTIALS_DIRECTORY")
	if !set || credDir == "" {
		v.add(key, "%s: CREDENTIALS_DIRECTORY is not set (systemd sets it for a unit with LoadCredential=%s:…)", pathText(file), name)
		return ""
	}
	file = filepath.Join(credDir, name)
	v.files = append(v.files, file)
	if strings.HasPrefix(key, "etcd.") {
		// systemd gives ExecStopPost= no credentials: the unit's
		// release-lease then cannot reach etcd.
		v.warn(key, "%s: systemd gives ExecStopPost= no credentials, so release-lease cannot reach etcd after a crash: "+
			"the crashed master's lease expires after its TTL instead (for a fast failover, keep etcd's password, CA, client certificate and key in files the service's user reads)", pathText(file))
	}
	return file
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pathText(pe.Path), pe.Err)
	}
	return err
}
