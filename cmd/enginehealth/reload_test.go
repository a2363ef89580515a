package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/testkit"
)

// logBuffer is a log sink whose JSON records a test reads.
type logBuffer struct{ testkit.Buffer }

// records returns the records whose msg contains msg.
func (b *logBuffer) records(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(b.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && strings.Contains(rec["msg"].(string), msg) {
			out = append(out, rec)
		}
	}
	return out
}

// keysOf returns the distinct "key" attributes of the records whose msg
// contains msg, sorted (a poll may reload between two writes of a test,
// and a key that needs a restart is named at every reload).
func (b *logBuffer) keysOf(msg string) []string {
	var keys []string
	for _, r := range b.records(msg) {
		if k, ok := r["key"].(string); ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

const reloadBase = `database: {dsn_file: dsn}
etcd: {endpoints: ["127.0.0.1:2379"]}
api: {listen: "127.0.0.1:8642"}
log: {level: info}
`

// TestReloadAppliesAndNamesTheRest: on SIGHUP the reloader applies
// log.level at once, names every other changed key as needing a restart
// (and keeps naming it while it differs from what the daemon started
// with), and a configuration that fails to load changes nothing and says
// why. A change to the file is seen by the poll without any signal.
func TestReloadAppliesAndNamesTheRest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		// Renamed over the file, as an editor or cert-manager does.
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("dsn", "postgres://eh@db:5432/eh?sslmode=disable")
	write("c.yaml", reloadBase)
	cfg, err := configs.Load(filepath.Join(dir, "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out logBuffer
	level := new(slog.LevelVar)
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: level}))
	hup := make(chan os.Signal, 1)
	r := newReloader(cfg, log, 20*time.Millisecond, hup, logLevel(level))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	reloads := func() int { return len(out.records("configuration reloaded")) }
	waitReloads := func(n int) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, "reload", func() (bool, error) { return reloads() >= n, nil })
	}

	// A SIGHUP with nothing changed: a reload, nothing to say.
	hup <- nil
	waitReloads(1)
	if k := out.keysOf("needs a restart"); len(k) != 0 {
		t.Fatalf("nothing changed, yet %v need a restart", k)
	}

	// log.level and api.listen and the DSN change: the level is applied,
	// the listener and the DSN need a restart.
	write("c.yaml", strings.Replace(strings.Replace(reloadBase, "level: info", "level: debug", 1), "8642", "8643", 1))
	write("dsn", "postgres://eh@db2:5432/eh?sslmode=disable")
	hup <- nil
	waitReloads(2)
	if level.Level() != slog.LevelDebug {
		t.Fatalf("log level %v after a reload to debug", level.Level())
	}
	if k := out.keysOf("reloaded"); len(k) != 1 || k[0] != "log.level" {
		t.Fatalf("reloaded keys %v, want [log.level]", k)
	}
	// (The poll may have reloaded between the two writes: the reload
	// after both names both.)
	testkit.Eventually(t, 10*time.Second, "api.listen and the DSN named as needing a restart", func() (bool, error) {
		k := strings.Join(out.keysOf("needs a restart"), ",")
		return k == "api.listen,database (the DSN)", fmt.Errorf("named %q", k)
	})

	// A broken file: the error is logged, the level stays.
	write("c.yaml", reloadBase+"bogus_key: 1\n")
	hup <- nil
	testkit.Eventually(t, 10*time.Second, "a failed reload logged", func() (bool, error) {
		return len(out.records("reload failed")) >= 1, nil
	})
	if level.Level() != slog.LevelDebug {
		t.Fatalf("a failed reload changed the level to %v", level.Level())
	}
	if rec := out.records("reload failed")[0]; !strings.Contains(rec["err"].(string), "bogus_key") {
		t.Fatalf("failed reload says %v, want the key at fault", rec["err"])
	}

	// Fixed back to the start's values, seen by the poll alone: nothing
	// needs a restart any more, the level is info again.
	before := reloads()
	write("dsn", "postgres://eh@db:5432/eh?sslmode=disable")
	write("c.yaml", reloadBase)
	waitReloads(before + 1)
	testkit.Eventually(t, 10*time.Second, "level back to info", func() (bool, error) {
		return level.Level() == slog.LevelInfo, nil
	})
	last := out.records("configuration reloaded")
	if n := last[len(last)-1]["keys_needing_restart"].(float64); n != 0 {
		t.Fatalf("after going back to the start's values, %v keys need a restart", n)
	}
}

// TestReloadPartsAreTheDocumentedKeys: the parts run reloads take
// exactly configs.ReloadableKeys, from which docs/configuration.md says
// which keys a reload applies, and own a key exactly when
// configs.Reloadable says a reload applies it.
func TestReloadPartsAreTheDocumentedKeys(t *testing.T) {
	parts := reloadParts(nil, &configs.Config{}, new(slog.LevelVar), nil)
	var keys []string
	for _, p := range parts {
		keys = append(keys, p.keys...)
	}
	slices.Sort(keys)
	want := slices.Sorted(slices.Values(configs.ReloadableKeys()))
	if !slices.Equal(keys, want) {
		t.Fatalf("the reloader's parts take %v, configs.ReloadableKeys says %v", keys, want)
	}
	ref, err := configs.Reference()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ref {
		path := strings.ReplaceAll(k.Path, "[]", "[0]")
		owned := slices.ContainsFunc(parts, func(p reloadable) bool { return p.owns(path) })
		if owned != configs.Reloadable(path) {
			t.Errorf("%s: a part owns it: %v; configs.Reloadable: %v", path, owned, configs.Reloadable(path))
		}
	}
}

// TestReloadNeverBlocksOnAFile: a FIFO (no writer: a plain open blocks
// for good) or a character device that never ends (/dev/zero) at a path
// the configuration names makes the reload fail at once, saying what is
// there, and the poll neither hangs nor reads without end; once the file
// is back, the next reload applies (outside review: the poll read every
// named file with a plain read, hung on a FIFO, ran out of memory on
// /dev/zero).
func TestReloadNeverBlocksOnAFile(t *testing.T) {
	dir := t.TempDir()
	dsn := filepath.Join(dir, "dsn")
	if err := os.WriteFile(dsn, []byte("postgres://eh@db:5432/eh?sslmode=disable"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(path, []byte(reloadBase), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var out logBuffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	hup := make(chan os.Signal, 1)
	r := newReloader(cfg, log, 20*time.Millisecond, hup)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	failed := func(want string) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, "the reload refusing "+want, func() (bool, error) {
			for _, rec := range out.records("reload failed") {
				if e, _ := rec["err"].(string); strings.Contains(e, want) {
					return true, nil
				}
			}
			return false, nil
		})
	}
	if err := os.Remove(dsn); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(dsn, 0o600); err != nil {
		t.Fatal(err)
	}
	hup <- nil
	failed("not a regular file (a FIFO)")
	if err := os.Remove(dsn); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", dsn); err != nil {
		t.Fatal(err)
	}
	hup <- nil
	failed("not a regular file (a character device)")
	if err := os.Remove(dsn); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dsn, []byte("postgres://eh@db:5432/eh?sslmode=disable"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := len(out.records("configuration reloaded"))
	hup <- nil
	testkit.Eventually(t, 10*time.Second, "a reload once the file is back", func() (bool, error) {
		return len(out.records("configuration reloaded")) > before, nil
	})
}
