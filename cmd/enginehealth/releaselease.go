package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/infra/leasefile"
	"github.com/enginehealth/enginehealth/leader"
)

// defaultReleaseTimeout bounds release-lease: systemd runs it before it
// restarts the unit, and it must never hold the restart up for long.
const defaultReleaseTimeout = 5 * time.Second

func newReleaseLeaseCmd() *cobra.Command {
	var (
		path    string
		timeout time.Duration
	)
	c := &cobra.Command{
		Use:   "release-lease",
		Short: "Revoke the etcd lease of this node's daemon once its process is gone (the unit's ExecStopPost=)",
		Long: `Revoke the etcd election lease that this node's daemon recorded in its
state file (lease.json in node.state_dir, default $STATE_DIRECTORY), so
that after a crash (SIGKILL, an OOM kill, a panic) the next master takes
office at once instead of when the lease's TTL runs out (etcd.lease_ttl).
The unit runs it as ExecStopPost=, which systemd starts only once every
process of the unit has exited: the lease belongs to no living process.
The new master still acts only once the dead one's trust window has
surely closed (lease_ttl − trust_margin after the revocation), and the
fence in PostgreSQL is unchanged: a revocation made in error costs a
failover, never two acting masters. It never touches the node's record:
a node that crashed still comes back in Unexpected shutdown.

It reads the configuration for etcd's endpoints, TLS and user, as the
daemon connects (the database's and the API's secrets are not needed;
systemd gives ExecStopPost= no credentials, so etcd's password and client
key must be files the service's user reads, not credential:NAME),
talks to the configured endpoints only, and gives up after --timeout. It
revokes only a lease whose election key names this node and the
incarnation the file records (a state file is this user's or root's, not
writable by others, no symbolic link), and refuses any other (exit 4).
With nothing to release (no state file: the daemon stopped cleanly, or
never held a lease) it does nothing and says nothing; a lease that is
gone already (expired, revoked) is no error; either way the state file is
removed once done. It refuses (exit 4), saying why, while the process
that recorded the lease is still running, or when it cannot tell (the pid
and the process's start time are compared, so a later process given the
same pid is not mistaken for it). Exit 1 when the state file cannot be
read or etcd did not revoke the lease in time (it then expires after its
TTL); exit 2 for an invalid configuration.

A host that dies (power, a kernel panic, a network cut) runs no
ExecStopPost=: its master is replaced when the lease expires, as before.`,
		Example: `  ExecStopPost=/usr/local/bin/enginehealth release-lease --config /etc/enginehealth/enginehealth.yaml
  sudo env STATE_DIRECTORY=/var/lib/enginehealth enginehealth release-lease --config /etc/enginehealth/enginehealth.yaml`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if timeout <= 0 || timeout > maxReleaseTimeout {
				return usageError{fmt.Errorf("--timeout %s: want a positive duration of at most %s (it holds up the unit's restart)", timeout, maxReleaseTimeout)}
			}
			// No secret is needed to find the lease file: with none left
			// (a clean stop), release-lease is silent even where etcd's
			// secrets cannot be read (ExecStopPost= gets no credentials).
			st, err := configs.LoadState(path)
			if err != nil {
				return err
			}
			dir := st.Node.StateDirectory
			if dir == "" {
				fmt.Fprintln(c.OutOrStdout(), "nothing to release: no state directory (node.state_dir, or $STATE_DIRECTORY as systemd's StateDirectory= sets it)")
				return nil
			}
			rec, readErr := leasefile.Read(dir)
			if errors.Is(readErr, fs.ErrNotExist) {
				return nil // a clean stop removed it, or no lease was ever held
			}
			// etcd's secrets alone: the DSN and the API token are not needed.
			cfg, err := configs.LoadEtcd(path)
			if err != nil {
				return noCredentials(err)
			}
			log, _, err := newLogger(cfg.Log.Format, cfg.Log.Level, c.ErrOrStderr())
			if err != nil {
				return err
			}
			if readErr != nil {
				return fmt.Errorf("state file %s: %w", leasefile.Path(dir), readErr)
			}
			who := fmt.Sprintf("lease %s of node %s (incarnation %s, pid %d)", rec.Lease, safe(rec.Node), safe(rec.Incarnation), rec.Process.PID)
			self, err := cfg.NodeName(os.Hostname)
			if err != nil {
				return err
			}
			if rec.Node != self || rec.Prefix != cfg.Etcd.Prefix {
				return refusedError{fmt.Errorf("not releasing %s: the state file is of node %s under prefix %s, this configuration's node.name is %s and etcd.prefix %s",
					who, safe(rec.Node), safe(rec.Prefix), safe(self), safe(cfg.Etcd.Prefix))}
			}
			switch alive, err := leasefile.Alive(rec.Process); {
			case err != nil:
				return refusedError{fmt.Errorf("not releasing %s: %w", who, err)}
			case alive:
				return refusedError{fmt.Errorf("not releasing %s: that daemon is still running (the same pid and start time); "+
					"release-lease is for a daemon whose process is gone, as systemd runs it (ExecStopPost=). "+
					"To hand over from a running master, stop it (systemctl stop enginehealth): it resigns at once", who)}
			}
			ctx, cancel := context.WithTimeout(c.Context(), timeout)
			defer cancel()
			start := time.Now()
			revoked, err := revokeRecorded(ctx, cfg, self, rec, timeout, log)
			var refused refusedError
			if errors.As(err, &refused) {
				return refusedError{fmt.Errorf("not releasing %s: %w", who, refused.error)}
			}
			if err != nil {
				return fmt.Errorf("%s: %w; it expires after its TTL (etcd.lease_ttl %s)", who, err, cfg.Etcd.LeaseTTL)
			}
			if _, err := leasefile.RemoveFor(dir, rec.Process); err != nil {
				return fmt.Errorf("%s released, but the state file %s could not be removed: %w", who, leasefile.Path(dir), err)
			}
			if revoked {
				log.InfoContext(ctx, "released the etcd lease of a daemon whose process is gone: the next master takes office now",
					"lease", rec.Lease.String(), "node", rec.Node, "incarnation", rec.Incarnation, "pid", rec.Process.PID,
					"took", time.Since(start).Round(time.Millisecond))
			} else {
				log.DebugContext(ctx, "the recorded etcd lease was gone already (expired or revoked): nothing to release",
					"lease", rec.Lease.String(), "node", rec.Node)
			}
			return nil
		},
	}
	configFlag(c, &path)
	c.Flags().DurationVar(&timeout, "timeout", defaultReleaseTimeout, "give up after this long (the lease then expires after its TTL)")
	return c
}

// maxReleaseTimeout bounds --timeout: release-lease runs before systemd
// restarts the daemon, and past the lease's TTL there is nothing left to
// gain.
const maxReleaseTimeout = time.Minute

// noCredentials adds, to a configuration error that names an etcd secret
// as a systemd credential while $CREDENTIALS_DIRECTORY is unset, why:
// systemd gives ExecStopPost= no credentials.
func noCredentials(err error) error {
	var cerr *configs.Error
	if !errors.As(err, &cerr) || os.Getenv("CREDENTIALS_DIRECTORY") != "" {
		return err
	}
	for _, p := range cerr.Problems {
		if strings.HasPrefix(p.Path, "etcd.") && strings.Contains(p.Msg, "CREDENTIALS_DIRECTORY is not set") {
			return fmt.Errorf("%w\n(systemd gives ExecStopPost= no credentials: for release-lease, keep etcd's password, CA, client certificate and key in files the service's user reads; "+
				"until then a crashed master's lease expires after its TTL)", err)
		}
	}
	return err
}

// revokeRecorded revokes rec's lease with a client made as the daemon's
// (etcdClientConfig: the configured members, TLS and user; never the
// endpoints the file names, which anyone could have written), once its
// election key is seen to name this node (self) and the recorded
// incarnation, within ctx, logging to log. revoked is false when the
// lease was gone already; a refusedError when the lease is another's.
func revokeRecorded(ctx context.Context, cfg *configs.Config, self string, rec leasefile.Record, timeout time.Duration, log *slog.Logger) (revoked bool, err error) {
	// The configured members only: the file's endpoints are what the
	// daemon followed, but a file names what anyone wrote in it, and the
	// client would send etcd's password there.
	ccfg, endpoints, user := etcdClientConfig(ctx, cfg)
	ccfg.Context = ctx
	ccfg.DialTimeout = min(ccfg.DialTimeout, timeout)
	explain := func(err error) error {
		if errors.Is(err, context.DeadlineExceeded) {
			// Not probed (explainEtcd would): the timeout bounds it all.
			return fmt.Errorf("etcd did not revoke it within %s (%w)", timeout, err)
		}
		return explainEtcd(ctx, cfg, endpoints, user, err)
	}
	cli, err := clientv3.New(ccfg) // with a user, it authenticates: bounded by ctx
	if err != nil {
		return false, explain(err)
	}
	defer func() { _ = cli.Close() }() // done with it: nothing to act on
	// Whose the lease is: only this node's recorded daemon's (its
	// election key names the node and its incarnation), never another's
	// working master, whatever a file says.
	cands, others, found, err := leader.LeaseHolders(ctx, cli, clientv3.LeaseID(rec.Lease), cfg.Etcd.Prefix, timeout/4)
	switch {
	case err != nil:
		return false, explain(err)
	case !found:
		return false, nil
	case len(others) > 0:
		return false, refusedError{fmt.Errorf("the lease holds keys that are not this cluster's election keys (%s): not this daemon's lease", safe(strings.Join(others, ", ")))}
	}
	for _, c := range cands {
		if c.Name != self || c.Incarnation != rec.Incarnation {
			return false, refusedError{fmt.Errorf("the lease is the election key of node %s (incarnation %s), not of this node's recorded daemon: not released",
				safe(c.Name), safe(c.Incarnation))}
		}
	}
	// A quarter of the time each attempt: the look, then the revocation.
	revoked, err = leader.RevokeLease(ctx, cli, clientv3.LeaseID(rec.Lease), timeout/4, log)
	if err != nil {
		return false, explain(err)
	}
	return revoked, nil
}
