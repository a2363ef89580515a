package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/jsonx"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/infra/tlsfiles"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// clientFlags are the flags of every command that talks to a daemon.
type clientFlags struct {
	addr      string
	output    string
	tokenFile string
	// TLS: the CA that verifies the daemon, and a client certificate.
	caCert, cert, key string
}

func (f *clientFlags) register(c *cobra.Command) {
	f.registerAPI(c)
	c.Flags().StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	c.Flags().StringVar(&f.tokenFile, "token-file", "", "file holding the API token for mutations (default: the token itself from $ENGINEHEALTH_TOKEN)")
}

// registerAPI registers --api and the TLS flags alone (a command that
// prints no listing and sends no mutation).
func (f *clientFlags) registerAPI(c *cobra.Command) {
	f.output = "table"
	c.Flags().StringVar(&f.addr, "api", "", "daemon API address: host:port or https://host:port (default $ENGINEHEALTH_API, else "+configs.DefaultListen+")")
	c.Flags().StringVar(&f.caCert, "cacert", "", "CA certificate (PEM) that verifies the daemon's, for https:// (default $ENGINEHEALTH_CACERT, else the system's roots)")
	c.Flags().StringVar(&f.cert, "cert", "", "client certificate (PEM) for a daemon that asks for one (default $ENGINEHEALTH_CERT)")
	c.Flags().StringVar(&f.key, "key", "", "key of --cert (PEM) (default $ENGINEHEALTH_KEY)")
}

// tlsConfig loads the CLI's TLS files (nil: none given), each problem
// named by its flag.
func (f *clientFlags) tlsConfig() (*tls.Config, error) {
	// Each file from its flag, else its variable; named so in messages.
	from := map[string]string{}
	pick := func(key, flag, flagVal, envName string) string {
		if flagVal != "" {
			from[key] = flag
			return flagVal
		}
		from[key] = flag + " ($" + envName + ")"
		return os.Getenv(envName)
	}
	ca := pick("cli.ca_file", "--cacert", f.caCert, "ENGINEHEALTH_CACERT")
	cert := pick("cli.cert_file", "--cert", f.cert, "ENGINEHEALTH_CERT")
	key := pick("cli.key_file", "--key", f.key, "ENGINEHEALTH_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	client, err := tlsfiles.Client("cli", tlsfiles.Files{CAFile: ca, CertFile: cert, KeyFile: key}, time.Now())
	var terr *tlsfiles.Error
	if errors.As(err, &terr) {
		names := strings.NewReplacer("cli.ca_file", "--cacert", "cli.cert_file", "--cert", "cli.key_file", "--key")
		var msgs []string
		for _, p := range terr.Problems {
			msgs = append(msgs, from[p.Key]+": "+names.Replace(p.Msg))
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	if err != nil {
		return nil, err
	}
	return client.Config, nil
}

func (f *clientFlags) client() (*api.Client, error) {
	if f.output != "table" && f.output != "json" {
		return nil, usageError{fmt.Errorf("--output %q: want table or json", f.output)}
	}
	addr := cmp.Or(f.addr, os.Getenv("ENGINEHEALTH_API"), configs.DefaultListen)
	if err := validAddr(addr); err != nil {
		return nil, usageError{err}
	}
	token, from := strings.TrimSpace(os.Getenv("ENGINEHEALTH_TOKEN")), "$ENGINEHEALTH_TOKEN"
	if f.tokenFile != "" {
		// Not waited on when a FIFO, nor read whole when huge.
		t, err := configs.ReadSecretFile(f.tokenFile)
		if err != nil {
			return nil, usageError{fmt.Errorf("--token-file: %w", err)}
		}
		token, from = t, "--token-file"
	}
	if p := configs.TokenProblem(token); token != "" && p != "" {
		return nil, usageError{fmt.Errorf("%s: %s", from, p)}
	}
	cl := api.NewClient(addr, token)
	tc, err := f.tlsConfig()
	if err != nil {
		return nil, usageError{err}
	}
	if tc != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		cl.HTTP.Transport = tr
	}
	return cl, nil
}

// validAddr checks a daemon address: host:port, or an http(s) base URL.
func validAddr(addr string) error {
	raw := addr
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	var port int
	if err == nil {
		port, err = strconv.Atoi(u.Port())
	}
	if err != nil || u.Hostname() == "" || port < 1 || port > 65535 || (u.Scheme != "http" && u.Scheme != "https") ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		shown := addr
		if i := strings.LastIndex(shown, "@"); i >= 0 {
			shown = "…@" + shown[i+1:] // never echo credentials
		}
		return fmt.Errorf("--api %q: want host:port (127.0.0.1:8642) or an http:// or https:// URL with a port from 1 to 65535, without credentials or a path", shown)
	}
	return nil
}

// apiAccess says how the API is served, for config check.
func apiAccess(a configs.API) string {
	if a.TLS == nil {
		return "plain HTTP (no api.tls): tokens cross the network in clear"
	}
	leaf := a.ServerCert.Load().Leaf
	return fmt.Sprintf("HTTPS, advertised as %s, certificate CN %q expires %s, client certificates: %s",
		a.AdvertiseURL(a.Listen), leaf.Subject.CommonName, leaf.NotAfter.UTC().Format(time.RFC3339), a.TLS.ClientAuth)
}

// statusReport is the output of `enginehealth status`: the node's
// liveness and the cluster's status (GET /v1/status); when the status
// cannot be read (the database is down), this node's readiness and why
// the status could not be read.
type statusReport struct {
	Health apitype.Health  `json:"health"`
	Status *apitype.Status `json:"status"`
	// Ready and StatusError: when Status could not be read (null
	// otherwise).
	Ready       *apitype.Ready `json:"ready"`
	StatusError string         `json:"status_error" null:"zero"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (r statusReport) MarshalJSON() ([]byte, error) { return jsonx.Marshal(r) }

func newStatusCmd() *cobra.Command {
	var f clientFlags
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the cluster on one screen; exit 0 only when this node is Ready",
		Long: `Show this node (status, readiness, liveness checks), the acting master and
its term, whether the cluster is paused or the disruption guard holds, the
master's check passes, the nodes that are not Ready or not NORMAL and why,
the last run, the holds waiting, whether this node reaches etcd (and why
not), and this node's certificate files that expire within 7 days or have
expired (a warning). Exit 0 only when this node is ready
and healthy and the cluster's status could be read (1 otherwise, 3 when
the daemon is unreachable).`,
		Example: `  enginehealth status
  enginehealth status --api 10.0.0.7:8642 -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
			defer cancel()
			var rep statusReport
			if rep.Health, err = cl.Health(ctx); err != nil && !isStatus(err) {
				return err
			}
			if rep.Health.Status == "" {
				return fmt.Errorf("%w at %s: the answer of /healthz is not an enginehealth daemon's", api.ErrUnreachable, cl.Addr)
			}
			st, err := cl.Status(ctx)
			switch {
			case err == nil:
				rep.Status = &st
			case isStatus(err):
				rep.StatusError = err.Error()
				r, err := cl.Ready(ctx)
				if err != nil && !isStatus(err) {
					return err
				}
				rep.Ready = &r
			default:
				return err
			}
			if f.output == "json" {
				err = writeJSON(c.OutOrStdout(), rep)
			} else {
				err = statusTable(c.OutOrStdout(), rep, clock())
			}
			if err != nil {
				return err
			}
			if rep.Status == nil || !rep.Status.Node.Ready.Ready || rep.Health.Status != "ok" {
				return errNotReady
			}
			return nil
		},
	}
	f.register(c)
	return c
}

// statusTable prints a status report on one screen.
func statusTable(w io.Writer, rep statusReport, now time.Time) error {
	line := labelled(w)
	rd := rep.Ready
	if rep.Status != nil {
		rd = &rep.Status.Node.Ready
	}
	if rd != nil {
		text := safe(rd.Status)
		if rd.Grade != "" {
			text += ", grade " + safe(rd.Grade)
		}
		if !rd.Ready {
			text += ": not ready"
			if rd.Reason != "" {
				text += " (" + safe(rd.Reason) + ")"
			}
		}
		line("node", "%s", text)
	}
	line("health", "%s", safe(rep.Health.Status))
	for _, name := range slices.Sorted(maps.Keys(rep.Health.Checks)) {
		if res := rep.Health.Checks[name]; res != "ok" {
			line("", "%s: %s", safe(name), safe(res))
		}
	}
	st := rep.Status
	if st == nil {
		line("cluster", "cannot be read: %s", safe(rep.StatusError))
		return nil
	}
	if l := st.Master; l != nil {
		line("master", "%s at %s, term %d, in office since %s", safe(l.Name), safe(l.APIAddress), l.Term, l.Since.Format(time.RFC3339))
		line("checks", "%s", safe(passSummary(st.Checks, now)))
		line("sweep", "%s", sweepSummary(st.Checks, st.Paused.Paused, now))
		if l.Stuck != "" {
			line("", "STUCK: %s", safe(l.Stuck))
		}
	} else {
		line("master", "none acting: %s", safe(st.MasterError))
	}
	if st.Paused.Paused {
		line("paused", "%s; no automatic repair until enginehealth resume", safe(st.Paused.String()))
	}
	if st.Disruption != "" {
		line("guard", "HOLDS: %s", safe(st.Disruption))
	}
	var counts []string
	for _, s := range []nodes.Status{nodes.StatusReady, nodes.StatusRecovering, nodes.StatusNotResponding, nodes.StatusUnexpectedShutdown} {
		if n := st.Nodes[string(s)]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, s))
		}
	}
	line("nodes", "%s", cmp.Or(strings.Join(counts, ", "), "none registered"))
	if len(st.NotReady) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, n := range st.NotReady {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s ago\t%s\n", safe(n.Name), safe(n.Status), safe(n.Grade),
				(time.Duration(n.SecondsSinceActive) * time.Second).String(), safe(n.Why))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r := st.LastRun; r != nil {
		line("last run", "%s", runLine(*r, now))
	} else {
		line("last run", "none yet")
	}
	if r := st.LastActed; r != nil && (st.LastRun == nil || r.ID != st.LastRun.ID) {
		line("last act", "%s", runLine(*r, now))
	}
	if st.Holds.Open > 0 && st.Holds.OldestAgeSeconds != nil {
		line("holds", "%d waiting for an operator, the oldest for %s (enginehealth holds)", st.Holds.Open,
			(time.Duration(*st.Holds.OldestAgeSeconds) * time.Second).String())
	} else {
		line("holds", "none waiting")
	}
	if e := st.Etcd; e != nil {
		if e.Reachable {
			line("etcd", "reachable from %s", st.Node.Name)
		} else {
			line("etcd", "NOT reachable from %s since %s: %s", st.Node.Name, e.Since.Local().Format(time.DateTime), e.Error)
		}
	}
	certificateLines(st.Certificates, line)
	return nil
}

// certificateLines says which of the node's certificate files expire
// within 7 days or have expired (nothing without any file).
func certificateLines(cs []apitype.Certificate, line func(label, format string, args ...any)) {
	var soon []apitype.Certificate
	for _, c := range cs {
		if c.ExpiringSoon {
			soon = append(soon, c)
		}
	}
	switch {
	case len(cs) == 0:
		return
	case len(soon) == 0:
		line("certs", "%d watched, none expiring within 7 days", len(cs))
		return
	}
	line("certs", "WARNING: %d of %d expiring within 7 days or expired; renew them", len(soon), len(cs))
	for _, c := range soon {
		cn := ""
		if c.CN != "" {
			cn = fmt.Sprintf(" (CN %q)", c.CN)
		}
		when := "expires in " + days(c.ExpiresInSeconds)
		if c.Expired() {
			when = "EXPIRED " + days(-c.ExpiresInSeconds) + " ago"
		}
		line("", "%s%s %s, at %s", safe(c.Which), safe(cn), when, c.NotAfter.UTC().Format(time.RFC3339))
	}
}

// days says a number of seconds in days, or in hours below two days.
func days(s float64) string {
	if s < 2*86400 {
		return fmt.Sprintf("%.1f hours", s/3600)
	}
	return fmt.Sprintf("%.1f days", s/86400)
}

// labelled returns the line printer of the status table: a label, then
// the text.
func labelled(w io.Writer) func(label, format string, args ...any) {
	return func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-9s"+format+"\n", append([]any{label}, args...)...)
	}
}

// runLine says what a run did, on one line.
func runLine(r apitype.Run, now time.Time) string {
	return fmt.Sprintf("%d %s (%s, term %d) %s %s ago: %d claims expired, %d of %d instances repaired%s", r.ID, safe(string(r.Kind)), safe(string(r.Trigger)), r.Term,
		safe(r.Status), now.Sub(r.StartedAt).Round(time.Second), r.ClaimsExpired, r.Done, r.Planned, safe(prefixed("; ", r.Error)))
}

// prefixed is p+s, or "" when s is empty.
func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

var errNotReady = errors.New("node not ready")

// passSummary says how the master's check passes go.
func passSummary(p apitype.PassStats, now time.Time) string {
	last := "no pass succeeded yet"
	if !p.LastSuccess.IsZero() {
		last = fmt.Sprintf("last pass succeeded %s ago", now.Sub(p.LastSuccess).Round(time.Second))
	}
	if p.ConsecutiveFailures == 0 {
		return last
	}
	return fmt.Sprintf("%s; %d consecutive failures, last: %s", last, p.ConsecutiveFailures, p.LastError)
}

// sweepSummary says when the master's last sweep began (the pass that
// looks for every interrupted instance, also those without a claim) and
// when the next is expected.
func sweepSummary(p apitype.PassStats, paused bool, now time.Time) string {
	last := "none yet in this office"
	if !p.LastSweep.IsZero() {
		last = fmt.Sprintf("last %s (%s ago)", p.LastSweep.UTC().Format(time.RFC3339), now.Sub(p.LastSweep).Round(time.Second))
	}
	var next string
	switch d := p.NextSweep.Sub(now).Round(time.Second); {
	case !p.NextSweep.IsZero() && d > 0:
		next = fmt.Sprintf("next about %s (in %s)", p.NextSweep.UTC().Format(time.RFC3339), d)
	case !p.NextSweep.IsZero():
		next = "next with the next pass"
	case paused:
		next = "none while paused"
	default:
		next = "none expected"
	}
	return last + "; " + next
}

func isStatus(err error) bool {
	var se *api.StatusError
	return errors.As(err, &se)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newConfigCmd() *cobra.Command {
	c := group("config", "Configuration commands")
	var path string
	var withDB bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate a configuration file and print a summary (touches no database unless --database)",
		Long: `Validate a configuration file: exit 0 and print what it configures (and
what each retry policy will do, retry after retry), or exit 2 with what is
wrong. With --database, also check that every workflow table and column
exists, and that the schema (once migrated) is on the PostgreSQL cluster
that answers; it only reads, so a standby will do.`,
		Example: `  enginehealth config check -c /etc/enginehealth/enginehealth.yaml
  enginehealth config check -c enginehealth.yaml --database`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := configs.Load(path)
			if err != nil {
				return err
			}
			if err := configSummary(c.OutOrStdout(), cfg); err != nil {
				return err
			}
			if !withDB {
				return nil
			}
			pool := cfg.Database.Pool("enginehealth config check")
			pool.ReadOnly = true // it only reads: a standby will do
			db, err := pgdb.Open(pool)
			if err != nil {
				return err
			}
			defer func() { _ = db.Close() }() // closing a pool after use: nothing to act on
			ctx, cancel := context.WithTimeout(c.Context(), cfg.Database.StatementTimeout)
			defer cancel()
			if err := recovery.CheckCatalog(ctx, db, cfg.RecoveryWorkflows()); err != nil {
				var ce *recovery.CatalogError
				if errors.As(err, &ce) {
					return usageError{err}
				}
				return fmt.Errorf("%w (database %s)", err, cfg.Database.RedactedDSN())
			}
			fmt.Fprintln(c.OutOrStdout(), "database   every workflow table and column exists")
			// The cluster the schema was migrated on, when it was: another
			// one behind the address is refused by run.
			st, err := pgdb.Status(ctx, db, cfg.Database.Schema)
			if err != nil {
				return fmt.Errorf("%w (database %s)", err, cfg.Database.RedactedDSN())
			}
			if rec := st.Cluster.RecordedSystemIdentifier; rec != nil && *rec != st.Cluster.SystemIdentifier {
				return fmt.Errorf("%w (database %s)", &pgdb.WrongClusterError{Want: *rec, Got: st.Cluster.SystemIdentifier, Schema: cfg.Database.Schema},
					cfg.Database.RedactedDSN())
			}
			return nil
		},
	}
	configFlag(check, &path)
	check.Flags().BoolVar(&withDB, "database", false, "also check the workflow tables and columns against the database")
	c.AddCommand(check)
	return c
}

// etcdAccess says how the daemon will reach and authenticate to etcd:
// TLS (what verifies the members, which certificate it presents and
// until when), and as which user.
func etcdAccess(e configs.Etcd) string {
	parts := []string{"plain (no TLS)"}
	if e.TLS == nil && e.ClientTLS != nil {
		parts[0] = "TLS (an https:// endpoint), members verified by the system's roots"
	}
	if t := e.TLS; t != nil {
		roots := "the system's roots"
		if t.CAFile != "" {
			roots = t.CAFile
		}
		parts[0] = "TLS, members verified by " + roots
		if t.ServerName != "" {
			parts[0] += " as " + t.ServerName
		}
		if e.ClientCert != nil {
			leaf := e.ClientCert.Load().Leaf
			parts[0] += fmt.Sprintf(", client certificate %s (CN %q, valid until %s)", t.CertFile, leaf.Subject.CommonName, leaf.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	switch _, user, _ := e.ClientEndpoints(); {
	case e.Username != "":
		parts = append(parts, fmt.Sprintf("user %q", user))
	case user != "":
		parts = append(parts, fmt.Sprintf("user %q (from an endpoint)", user))
	default:
		parts = append(parts, "no user")
	}
	return strings.Join(parts, "; ")
}

// configSummary writes config check's summary of cfg to out, with what
// could rewrite a terminal escaped (paths, the prefix: the file's text).
func configSummary(out io.Writer, cfg *configs.Config) error {
	name, err := cfg.NodeName(os.Hostname)
	if err != nil {
		return usageError{err}
	}
	var buf bytes.Buffer
	w := &buf
	defer func() { _, _ = io.WriteString(out, terminalText(buf.String())) }()
	fmt.Fprintf(w, "%s: valid\n", cfg.Path)
	for _, warning := range cfg.Warnings {
		fmt.Fprintf(w, "warning    %s\n", warning)
	}
	fmt.Fprintf(w, "node       %s (heartbeat every %s)\n", name, cfg.Node.HeartbeatInterval)
	fmt.Fprintf(w, "database   %s, schema %s\n", cfg.Database.RedactedDSN(), cfg.Database.Schema)
	fmt.Fprintf(w, "etcd       %s, prefix %s, lease TTL %s, trust margin %s\n", strings.Join(cfg.Etcd.RedactedEndpoints(), ","), cfg.Etcd.Prefix, cfg.Etcd.LeaseTTL, cfg.Etcd.TrustMargin)
	fmt.Fprintf(w, "etcd auth  %s\n", etcdAccess(cfg.Etcd))
	if dir := cfg.Node.StateDirectory; dir != "" {
		fmt.Fprintf(w, "state      %s (the etcd lease, for release-lease after a crash)\n", dir)
	} else {
		fmt.Fprintf(w, "state      none here (node.state_dir, else $STATE_DIRECTORY, which systemd's StateDirectory= sets): no lease file, a crashed master is replaced after its lease's TTL\n")
	}
	fmt.Fprintf(w, "health     %s, not responding after %s, forget after %s, sweep every %s\n", cfg.Health.Schedule, cfg.Health.NotRespondingAfter,
		cfg.Health.ForgetAfter, cfg.Health.SweepInterval)
	roles := map[string]int{}
	for _, o := range cfg.API.Operators {
		roles[o.Role]++
	}
	ops := "mutations off (no operator)"
	if n := len(cfg.API.Operators); n > 0 {
		ops = fmt.Sprintf("%d %s (%d %s, %d %s)", n, plural(int64(n), "operator", "operators"),
			roles[configs.RoleOperate], configs.RoleOperate, roles[configs.RoleRead], configs.RoleRead)
	}
	reads := "reads open"
	if cfg.API.AuthReads {
		reads = "reads need a token"
	}
	fmt.Fprintf(w, "api        %s, %s, %s\n", cfg.API.Listen, ops, reads)
	fmt.Fprintf(w, "api tls    %s\n", apiAccess(cfg.API))
	models := cfg.RecoveryWorkflows()
	for i, wf := range cfg.Workflows {
		kind := "not claimable"
		if wf.Claimable {
			kind = "claimable, claims in " + wf.Claims.Table
		}
		fmt.Fprintf(w, "workflow   %s: %s (%s), %d %s\n", wf.Name, wf.Table, kind, len(wf.Tasks), plural(int64(len(wf.Tasks)), "task", "tasks"))
		for j, t := range wf.Tasks {
			atomic := ""
			if t.AtomicInternal {
				atomic = " (atomic)"
			}
			fmt.Fprintf(w, "  task     %s%s: %s -> %s -> %s | %s\n", t.Name, atomic, t.Begin, t.Interim, strings.Join(t.EndStates(), "/"), t.Failed)
			// What each policy will do, retry after retry.
			m := models[i].Tasks[j]
			fmt.Fprintf(w, "    interrupted (%s):\n", t.Interim)
			for _, e := range recovery.Effects(m, recovery.CauseInterrupt) {
				fmt.Fprintf(w, "      %s\n", e)
			}
			if m.FailurePolicy().Strategy != recovery.StrategyNone {
				fmt.Fprintf(w, "    failed by the engine (%s), from when the policy is first applied:\n", t.Failed)
				for _, e := range recovery.Effects(m, recovery.CauseFailure) {
					fmt.Fprintf(w, "      %s\n", e)
				}
			}
		}
	}
	return nil
}

func newVersionCmd() *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version, what it was built from, and the schema version it migrates to",
		Example: `  enginehealth version
  enginehealth version -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			b := buildInfo()
			switch output {
			case "json":
				return writeJSON(c.OutOrStdout(), b)
			case "table":
			default:
				return usageError{fmt.Errorf("--output %q: want table or json", output)}
			}
			commit := "unknown commit"
			if b.Commit != "" {
				commit = "commit " + b.Commit
			}
			built := "build date unknown"
			if !b.BuildDate.IsZero() {
				built = "built " + b.BuildDate.Format(time.RFC3339)
			}
			fmt.Fprintf(c.OutOrStdout(), "enginehealth %s (%s, %s, %s, %s, schema version %d)\n", b.Version, commit, built, b.GoVersion, b.Platform, b.SchemaVersion)
			return nil
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return c
}
