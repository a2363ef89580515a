package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/infra/safefile"
	"github.com/enginehealth/enginehealth/internal/infra/tlsfiles"
)

// DefaultReloadPoll is how often the daemon looks at its configuration
// file and the files it names for a change it did not get a SIGHUP for
// (a certificate renewed by cert-manager or certbot, a tokens file
// edited in place).
const DefaultReloadPoll = 30 * time.Second

// reloader re-reads the configuration on SIGHUP, and when the
// configuration file or a file it names changes, and applies what can
// change without a restart; every other key whose value differs from the
// one the daemon started with is logged as needing a restart, by its key
// path. A reload that fails (a file that does not parse, a certificate
// that does not load) keeps everything as it was and says why: the daemon
// never stops serving over it.
type reloader struct {
	path  string
	log   *slog.Logger
	poll  time.Duration
	hup   <-chan os.Signal
	parts []reloadable

	started *configs.Config // what the daemon started with
	last    *configs.Config // the last configuration loaded
	seen    []byte          // fingerprint of the files the last attempt read
}

// reloadable is a part of the configuration the daemon applies while it
// runs: keys are the key paths it takes (a key or a prefix ending in
// "."): one of configs' Reload*Keys lists, which docs/configuration.md
// is written from; apply installs next's values (or refuses them,
// changing nothing) and says what changed that no key shows (a
// certificate renewed in place), if anything.
type reloadable struct {
	keys  []string
	apply func(next *configs.Config) (changed []string, err error)
}

// logLevel makes log.level reloadable through level.
func logLevel(level *slog.LevelVar) reloadable {
	return reloadable{keys: configs.ReloadLogKeys, apply: func(next *configs.Config) ([]string, error) {
		return nil, level.UnmarshalText([]byte(next.Log.Level))
	}}
}

// operators makes the API's operators reloadable: the tokens file (or
// the single token) is read again and replaces the set every later
// request is checked against. Turning mutations on or off (no operators
// at start, or none now) needs a restart.
func operators(tokens *api.Tokens) reloadable {
	return reloadable{keys: configs.ReloadOperatorKeys, apply: func(next *configs.Config) ([]string, error) {
		ops := next.API.Operators
		switch {
		case tokens == nil && len(ops) == 0:
			return nil, nil
		case tokens == nil:
			return nil, errors.New("the daemon started without operators (mutations off): adding them needs a restart")
		case len(ops) == 0:
			return nil, errors.New("no operators left: the running ones are kept (turning mutations off needs a restart)")
		}
		before := tokens.Operators()
		if err := tokens.Set(apiOperators(ops)); err != nil {
			return nil, err
		}
		if !slices.Equal(before, tokens.Operators()) {
			return []string{fmt.Sprintf("operators (%d)", len(ops))}, nil
		}
		return nil, nil
	}}
}

// certificates makes the TLS material reloadable: the API's certificate
// and key, the CAs that verify its clients and the other nodes, the etcd
// client certificate and the CAs that verify the etcd members; each is
// swapped for the next handshakes, the connections open go on. Adding or
// removing a file (or TLS itself) and the client_auth mode need a
// restart.
//
// etcdChanged, when set, is called after the etcd client certificate or
// CAs were swapped: the daemon has the client try its members again at
// once rather than after gRPC's reconnection backoff (a node that could
// not connect with the old material connects as soon as the new one is
// in).
func certificates(run *configs.Config, etcdChanged func()) reloadable {
	return reloadable{
		keys: configs.ReloadCertificateKeys,
		apply: func(next *configs.Config) ([]string, error) {
			a, n := run.API, next.API
			if (a.TLS == nil) != (n.TLS == nil) {
				return nil, nil // api.tls itself changed: said as needing a restart
			}
			// Checked whole before anything is swapped: all or nothing.
			for _, pair := range [][2]bool{{a.ServerCert == nil, n.ServerCert == nil}, {a.ClientCAs == nil, n.ClientCAs == nil}, {a.PeerCAs == nil, n.PeerCAs == nil}, {run.Etcd.ClientCert == nil, next.Etcd.ClientCert == nil}, {run.Etcd.CAs == nil, next.Etcd.CAs == nil}} {
				if pair[0] != pair[1] {
					return nil, errors.New("a certificate, key or CA file was added or removed: that needs a restart")
				}
			}
			var changed []string
			swapCert := func(which string, cur, nxt *tlsfiles.Cert) {
				if cur == nil {
					return
				}
				if old, now := cur.Load(), nxt.Load(); !bytes.Equal(old.Certificate[0], now.Certificate[0]) {
					cur.Store(now)
					changed = append(changed, fmt.Sprintf("%s (CN %q, expires %s)", which, now.Leaf.Subject.CommonName, now.Leaf.NotAfter.UTC().Format(time.RFC3339)))
				}
			}
			swapCAs := func(which string, cur, nxt *tlsfiles.CAs) {
				if cur != nil && !cur.Load().Equal(nxt.Load()) {
					cur.Set(nxt.Load(), nxt.Certs())
					changed = append(changed, which)
				}
			}
			swapCert("api.tls.cert_file", a.ServerCert, n.ServerCert)
			swapCAs("api.tls.client_ca_file", a.ClientCAs, n.ClientCAs)
			swapCAs("api.tls.ca_file", a.PeerCAs, n.PeerCAs)
			before := len(changed)
			swapCert("etcd.tls.cert_file", run.Etcd.ClientCert, next.Etcd.ClientCert)
			swapCAs("etcd.tls.ca_file", run.Etcd.CAs, next.Etcd.CAs)
			if len(changed) > before && etcdChanged != nil {
				etcdChanged()
			}
			return changed, nil
		},
	}
}

// reloadParts are the parts of the configuration run reloads: the
// operators, the certificates, and log.level unless level is nil (the
// logger's level is fixed then, in tests: a change needs a restart).
func reloadParts(tokens *api.Tokens, run *configs.Config, level *slog.LevelVar, etcdChanged func()) []reloadable {
	parts := []reloadable{operators(tokens), certificates(run, etcdChanged)}
	if level != nil {
		parts = append(parts, logLevel(level))
	}
	return parts
}

func newReloader(cfg *configs.Config, log *slog.Logger, poll time.Duration, hup <-chan os.Signal, parts ...reloadable) *reloader {
	r := &reloader{path: cfg.Path, log: log, poll: poll, hup: hup, parts: parts, started: cfg, last: cfg}
	r.seen = r.fingerprint(cfg)
	return r
}

// notifyHUP returns a channel of SIGHUPs, stopped when ctx ends.
func notifyHUP(ctx context.Context) <-chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	context.AfterFunc(ctx, func() { signal.Stop(ch) })
	return ch
}

// Run reloads on every SIGHUP and on every change seen by the poll until
// ctx ends.
func (r *reloader) Run(ctx context.Context) error {
	t := time.NewTicker(r.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.hup:
			r.reload(ctx, "SIGHUP")
		case <-t.C:
			if cur := r.fingerprint(r.last); !bytes.Equal(cur, r.seen) {
				r.reload(ctx, "a file changed")
			}
		}
	}
}

// reload loads the configuration file again and applies it.
func (r *reloader) reload(ctx context.Context, why string) {
	// The files as they are before they are loaded: one that changes
	// while it is loaded (a renewal written in place) differs from this at
	// the next poll, and is loaded again then.
	seen := r.fingerprint(r.last)
	next, err := configs.Load(r.path)
	if err != nil {
		// Tried again when something changes again, or on SIGHUP.
		r.seen = seen
		r.log.ErrorContext(ctx, "reload failed: the running configuration is kept", "trigger", why, slog.Any("err", err))
		return
	}
	// Files next names that r.last did not are compared at the next poll
	// (one more reload, which changes nothing).
	r.seen = seen
	fresh := configs.Changed(r.last, next)
	failed := 0
	for _, p := range r.parts {
		// Applied every time: a part compares with what it runs (a
		// certificate renewed in place changes no key).
		changed, err := p.apply(next)
		if err != nil {
			failed++
			r.log.ErrorContext(ctx, "reload of "+strings.Join(p.keys, ", ")+" failed: the running values are kept", "trigger", why, slog.Any("err", err))
			continue
		}
		for _, c := range changed {
			r.log.InfoContext(ctx, "reloaded", "what", c)
		}
		for _, k := range fresh {
			if p.owns(k) {
				r.log.InfoContext(ctx, "reloaded", "key", k)
			}
		}
	}
	pending := configs.Changed(r.started, next)
	// What files hold, read at start only, changes no key.
	if r.started.Database.DSN != next.Database.DSN {
		pending = append(pending, "database (the DSN)")
	}
	if r.started.Etcd.Password != next.Etcd.Password {
		pending = append(pending, "etcd.password_file or password_env (the password)")
	}
	pending = slices.DeleteFunc(pending, func(k string) bool {
		return slices.ContainsFunc(r.parts, func(p reloadable) bool { return p.owns(k) })
	})
	for _, k := range pending {
		r.log.WarnContext(ctx, "this key changed but needs a restart to take effect; running with the value the daemon started with", "key", k)
	}
	r.last = next
	r.log.InfoContext(ctx, "configuration reloaded", "trigger", why, "parts_failed", failed, "keys_needing_restart", len(pending))
}

func (p reloadable) owns(key string) bool {
	for _, k := range p.keys {
		if key == k || strings.HasSuffix(k, ".") && strings.HasPrefix(key, k) {
			return true
		}
	}
	return false
}

// fingerprint hashes the configuration file and every file it names, so
// the poll sees an edit, a rename over the file (certbot, cert-manager)
// and a removal alike.
func (r *reloader) fingerprint(cfg *configs.Config) []byte {
	h := sha256.New()
	for _, p := range append([]string{r.path}, cfg.Files()...) {
		h.Write([]byte(p))
		h.Write([]byte{0})
		// Read as the loader reads it: never a FIFO or a device (which
		// would hang or feed the poll without end), never more than the
		// largest file a configuration may name.
		b, err := safefile.Read(p, fingerprintLimit)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			h.Write([]byte("absent"))
		case err != nil:
			h.Write([]byte("unreadable: " + err.Error())) // the kind or size changes the print
		default:
			h.Write(b)
		}
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// fingerprintLimit is the largest file a configuration names (the
// configuration file itself, a PEM bundle); a larger one is not read.
const fingerprintLimit = max(configs.MaxConfigBytes, tlsfiles.MaxFileBytes)
