package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// migrationsDir is where the schema migrations live in the repository:
// the previous release, without tags, is the parent of the last commit
// that changed them.
const migrationsDir = "internal/infra/pgdb/migrations"

// release is the previous release of the sidecar, as git finds it.
type release struct {
	commit string // the full hash
	// name says which commit and why: the tag, or the parent of the
	// last commit that changed the migrations.
	name string
	// version is what the binary's `enginehealth version` says.
	version string
	// autoSync: the release knows etcd.auto_sync_interval (and syncs by
	// default: a run that cuts its etcd proxies must turn it off).
	autoSync bool
}

var (
	prevOnce sync.Once
	prevBin  string
	prevRel  release
	prevErr  error
)

// previousRelease returns the previous release's enginehealth binary,
// built once per test binary run from a `git worktree` of its commit and
// cached by commit hash (beside the Go build cache), so that later runs
// find it built. The test fails, never skips, when it cannot: without
// git, outside a git work tree, or in a shallow clone (the history the
// selection reads is not there).
func previousRelease(t *testing.T) (string, release) {
	t.Helper()
	prevOnce.Do(func() {
		start := time.Now()
		var cached bool
		prevBin, prevRel, cached, prevErr = buildPreviousRelease()
		if prevErr == nil {
			how := "built in " + time.Since(start).Round(100*time.Millisecond).String()
			if cached {
				how = "cached"
			}
			t.Logf("previous release: %s (%s): %s", prevRel.name, how, prevBin)
		}
	})
	if prevErr != nil {
		t.Fatalf("the previous release of enginehealth: %v", prevErr)
	}
	return prevBin, prevRel
}

// git runs git in dir and returns its trimmed output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// selectPreviousRelease finds the previous release from the history of
// the repository at top: the newest v* tag reachable from HEAD's parent
// (so that a tagged HEAD is not its own previous release); without one,
// the parent of the last commit that changed the migrations, the newest
// commit whose binary knows fewer migrations than HEAD's.
func selectPreviousRelease(ctx context.Context, top string) (release, error) {
	if shallow, err := git(ctx, top, "rev-parse", "--is-shallow-repository"); err != nil {
		return release{}, err
	} else if shallow == "true" {
		return release{}, fmt.Errorf("%s is a shallow clone: the previous release is chosen from the history (its v* tags, "+
			"else the commits that changed %s), which a shallow clone does not hold; run `git fetch --unshallow --tags` "+
			"(or clone without --depth)", top, migrationsDir)
	}
	if tag, err := git(ctx, top, "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", "HEAD^"); err == nil && tag != "" {
		commit, err := git(ctx, top, "rev-parse", "--verify", tag+"^{commit}")
		if err != nil {
			return release{}, err
		}
		return release{commit: commit, name: "tag " + tag, version: tag}, nil
	}
	changed, err := git(ctx, top, "log", "-1", "--format=%H", "HEAD", "--", migrationsDir)
	if err != nil {
		return release{}, err
	}
	if changed == "" {
		return release{}, fmt.Errorf("no commit of HEAD's history changed %s: no previous release to run beside this one", migrationsDir)
	}
	commit, err := git(ctx, top, "rev-parse", "--verify", "--quiet", changed+"^")
	if err != nil || commit == "" {
		return release{}, fmt.Errorf("commit %s, the last to change %s, has no parent in this clone: no previous release", changed[:12], migrationsDir)
	}
	subject, err := git(ctx, top, "log", "-1", "--format=%s", changed)
	if err != nil {
		return release{}, err
	}
	return release{commit: commit, version: "prev-" + commit[:12],
		name: fmt.Sprintf("%s, the parent of %s %q, the last commit that changed the migrations", commit[:12], changed[:12], shorten(subject, 60))}, nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// buildPreviousRelease selects the previous release and returns its
// binary: from the cache when it was built before, else built from a
// temporary `git worktree` of its commit (removed afterwards).
func buildPreviousRelease() (path string, rel release, cached bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := exec.LookPath("git"); err != nil {
		return "", rel, false, errors.New("git is not in PATH: the rolling-upgrade test builds the previous release from this " +
			"repository's history (install git; Debian: apt-get install git)")
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", rel, false, err
	}
	top, err := git(ctx, wd, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", rel, false, fmt.Errorf("%s is not in a git work tree (%v): the rolling-upgrade test builds the previous "+
			"release from the repository's history; run it in a clone of the repository, not a copy of its files", wd, err)
	}
	if rel, err = selectPreviousRelease(ctx, top); err != nil {
		return "", rel, false, err
	}
	keys, err := git(ctx, top, "show", rel.commit+":configs/keys.go")
	if err != nil {
		return "", rel, false, err
	}
	rel.autoSync = strings.Contains(keys, `"Etcd.auto_sync_interval"`)
	dir := filepath.Join(prevCacheRoot(ctx), rel.commit)
	path = filepath.Join(dir, "enginehealth")
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return path, rel, true, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", rel, false, err
	}
	tmp, err := os.MkdirTemp("", "ehprev-")
	if err != nil {
		return "", rel, false, err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "src")
	if _, err := git(ctx, top, "worktree", "add", "--detach", "--quiet", src, rel.commit); err != nil {
		return "", rel, false, err
	}
	defer func() {
		if _, rerr := git(context.Background(), top, "worktree", "remove", "--force", src); rerr != nil && err == nil {
			err = rerr
		}
	}()
	// Built into the cache directory under a name of its own, then renamed:
	// a test binary running at the same time finds the whole file or none.
	part := fmt.Sprintf("%s.%d.part", path, os.Getpid())
	build := exec.CommandContext(ctx, "go", "build", "-buildvcs=false", "-ldflags", "-X main.version="+rel.version,
		"-o", part, "./cmd/enginehealth")
	build.Dir = src
	// The old tree's own go.mod decides its modules (the module cache or
	// the proxy has them); a go.work above the temporary directory must
	// not.
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		_ = os.Remove(part)
		return "", rel, false, fmt.Errorf("build %s: %v\n%s", rel.name, err, out)
	}
	if err := os.Rename(part, path); err != nil {
		return "", rel, false, err
	}
	return path, rel, false, nil
}

// prevCacheRoot is where built previous releases are kept:
// enginehealth-prev beside the Go build cache ($(go env GOCACHE)/..), or
// beside the test's binaries when there is no build cache.
func prevCacheRoot(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "go", "env", "GOCACHE").Output()
	if gocache := strings.TrimSpace(string(out)); err == nil && gocache != "" && gocache != "off" {
		return filepath.Join(filepath.Dir(gocache), "enginehealth-prev")
	}
	return filepath.Join(filepath.Dir(bin), "enginehealth-prev")
}
