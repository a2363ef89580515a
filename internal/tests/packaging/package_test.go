// Package packaging tests the .deb and .rpm that `make package` builds:
// lintian finds nothing, the .rpm holds the same files as the .deb but
// for each format's own conventions, the unit verifies in the extracted
// tree with its real ExecStart, and the installed binary runs.
package packaging

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/etcdtest"
	"github.com/enginehealth/enginehealth/internal/testkit/pgtest"
)

const repo = "../../.."

// testVersion is the version of the packages the test builds.
const testVersion = "0.1.0~test"

// built builds the amd64 packages once for every test of the package.
var built struct {
	deb, rpm string
	err      error
}

var (
	pg   *pgtest.Server
	etcd *etcdtest.Etcd
)

func TestMain(m *testing.M) {
	testkit.Main(m, func(m *testing.M) int {
		dir, err := os.MkdirTemp("", "enginehealth-packages-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		cmd := exec.Command("go", "run", "./internal/tools/pkgbuild", "-version", testVersion, "-commit", "0123abc",
			"-build-date", "2026-11-26T00:00:00Z", "-arch", "amd64", "-out", dir)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = &buildError{err, string(out)}
		}
		built.deb = filepath.Join(dir, "enginehealth_"+testVersion+"_amd64.deb")
		built.rpm = filepath.Join(dir, "enginehealth_"+testVersion+"_amd64.rpm")
		if etcd, err = etcdtest.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer etcd.Close()
		return pgtest.Main(m, &pg)
	})
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "make the packages: " + e.err.Error() + "\n" + e.out }

func packages(t *testing.T) (deb, rpm string) {
	t.Helper()
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.deb, built.rpm
}

func need(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("%s is needed (Debian package %s; .ci/run installs it)", tool, pkg)
	}
	return p
}

// TestLintianClean: lintian reports nothing on the .deb, not even
// information or pedantic hints (the two it would report are overridden
// with their reasons in the package: a static Go binary, a systemd-only
// service).
func TestLintianClean(t *testing.T) {
	t.Parallel()
	deb, _ := packages(t)
	lintian := need(t, "lintian", "lintian")
	out, err := exec.Command(lintian, "--info", "--pedantic", "--fail-on", "error,warning,info,pedantic", deb).CombinedOutput()
	var hints []string
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" && !strings.HasPrefix(l, "running with root privileges") && !strings.HasPrefix(l, "N: ") {
			hints = append(hints, l)
		}
	}
	if err != nil || len(hints) > 0 {
		t.Fatalf("lintian: %v\n%s", err, out)
	}
}

// debFiles lists the regular files (and symlinks) of a .deb.
func debFiles(t *testing.T, deb string) []string {
	t.Helper()
	out, err := exec.Command(need(t, "dpkg-deb", "dpkg"), "--fsys-tarfile", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	tar := exec.Command("tar", "-tv")
	tar.Stdin = strings.NewReader(string(out))
	list, err := tar.Output()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, l := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || strings.HasPrefix(f[0], "d") {
			continue
		}
		files = append(files, strings.TrimPrefix(f[5], "."))
	}
	slices.Sort(files)
	return files
}

// Files only one format has, each by its own convention.
var (
	debOnly = []string{
		"/usr/share/doc/enginehealth/changelog.Debian.gz", // an .rpm's changelog is in its header
		"/usr/share/doc/enginehealth/copyright",           // an .rpm's is under /usr/share/licenses
		"/usr/share/lintian/overrides/enginehealth",
		"/usr/share/zsh/vendor-completions/_enginehealth", // Debian's zsh path
	}
	rpmOnly = []string{
		"/usr/share/licenses/enginehealth/copyright",
		"/usr/share/zsh/site-functions/_enginehealth",
	}
)

// TestPackagesHoldTheSameFiles: the .deb holds the binary, the unit, the
// engine drop-in example, the configuration, the environment file, the
// sysusers.d user, a man page for every command and the completions; the
// .rpm the same files but for each format's own conventions.
func TestPackagesHoldTheSameFiles(t *testing.T) {
	t.Parallel()
	deb, rpm := packages(t)
	files := debFiles(t, deb)
	pages, err := filepath.Glob(filepath.Join(repo, "docs", "man", "*.1"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("man pages: %v", err)
	}
	want := []string{
		"/usr/bin/enginehealth",
		"/usr/lib/systemd/system/enginehealth.service",
		"/usr/share/doc/enginehealth/examples/engine-wait-enginehealth.conf",
		"/usr/share/doc/enginehealth/examples/example-tables.sql",
		"/etc/enginehealth/enginehealth.yaml",
		"/etc/default/enginehealth",
		"/usr/lib/sysusers.d/enginehealth.conf",
		"/usr/share/bash-completion/completions/enginehealth",
		"/usr/share/fish/vendor_completions.d/enginehealth.fish",
	}
	want = append(want, debOnly...)
	for _, p := range pages {
		want = append(want, "/usr/share/man/man1/"+filepath.Base(p)+".gz")
	}
	slices.Sort(want)
	if !slices.Equal(files, want) {
		t.Fatalf(".deb files\n%s\nwant\n%s", strings.Join(files, "\n"), strings.Join(want, "\n"))
	}
	// docs/install.md lists them (the man pages as one pattern).
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, rpmOnly...) {
		if strings.HasPrefix(f, "/usr/share/man/man1/") {
			f = "/usr/share/man/man1/enginehealth*.1.gz"
		}
		if !strings.Contains(string(doc), "`"+f+"`") {
			t.Errorf("docs/install.md does not list %s", f)
		}
	}
	// The environment file may hold the DSN: root's only.
	list, err := exec.Command("dpkg-deb", "-c", deb).Output()
	if err != nil || !regexp.MustCompile(`(?m)^-rw------- root/root .* \./etc/default/enginehealth$`).Match(list) {
		t.Fatalf("/etc/default/enginehealth is not root's only (0600): %v\n%s", err, list)
	}
	// The changelog's newest entry is this package's version.
	tarball, err := exec.Command("dpkg-deb", "--fsys-tarfile", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	tx := exec.Command("tar", "-xO", "./usr/share/doc/enginehealth/changelog.Debian.gz")
	tx.Stdin = bytes.NewReader(tarball)
	gz, err := tx.Output()
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	changelog, _ := io.ReadAll(zr)
	if first, _, _ := strings.Cut(string(changelog), "\n"); !strings.HasPrefix(first, "enginehealth ("+testVersion+") ") {
		t.Fatalf("the changelog's newest entry is %q, want version %s", first, testVersion)
	}
	// The configuration files are the package manager's to keep.
	out, err := exec.Command("dpkg-deb", "--info", deb, "conffiles").Output()
	if err != nil || strings.TrimSpace(string(out)) != "/etc/default/enginehealth\n/etc/enginehealth/enginehealth.yaml" &&
		strings.TrimSpace(string(out)) != "/etc/enginehealth/enginehealth.yaml\n/etc/default/enginehealth" {
		t.Fatalf("conffiles: %v %q", err, out)
	}

	rpmTool := need(t, "rpm", "rpm")
	out, err = exec.Command(rpmTool, "-qlp", rpm).Output()
	if err != nil {
		t.Fatal(err)
	}
	rpmFiles := strings.Fields(string(out))
	slices.Sort(rpmFiles)
	wantRPM := slices.DeleteFunc(slices.Clone(want), func(f string) bool { return slices.Contains(debOnly, f) })
	wantRPM = append(wantRPM, rpmOnly...)
	slices.Sort(wantRPM)
	if !slices.Equal(rpmFiles, wantRPM) {
		t.Fatalf(".rpm files\n%s\nwant\n%s", strings.Join(rpmFiles, "\n"), strings.Join(wantRPM, "\n"))
	}
	out, err = exec.Command(rpmTool, "-qp", "--configfiles", rpm).Output()
	if got := strings.Fields(string(out)); err != nil || !slices.Contains(got, "/etc/enginehealth/enginehealth.yaml") || !slices.Contains(got, "/etc/default/enginehealth") {
		t.Fatalf("rpm config files: %v %q", err, out)
	}
}

// TestMaintainerScriptsNeverStart: the scripts create the user and
// reload systemd's units, and never start, restart or enable the
// service: an operator decides when a node joins.
func TestMaintainerScriptsNeverStart(t *testing.T) {
	t.Parallel()
	deb, _ := packages(t)
	out, err := exec.Command("dpkg-deb", "--info", deb, "postinst").Output()
	if err != nil {
		t.Fatal(err)
	}
	script := string(out)
	if !strings.Contains(script, "systemd-sysusers enginehealth.conf") || !strings.Contains(script, "daemon-reload") {
		t.Fatalf("postinst does not create the user or reload systemd:\n%s", script)
	}
	for _, l := range strings.Split(script, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		for _, verb := range []string{" start", " restart", " enable", " try-restart", " reload-or-restart"} {
			if strings.Contains(l, "systemctl") && strings.Contains(l, verb) || strings.Contains(l, "deb-systemd-invoke") {
				t.Fatalf("postinst line %q starts or enables the service", l)
			}
		}
	}
}

// TestInstalledTree: the extracted .deb, over a base of systemd's own
// targets and /bin/kill, passes systemd-analyze verify with the unit's
// real ExecStart and ExecStopPost (/usr/bin/enginehealth, the packaged
// binary: run, and release-lease), and the
// installed binary runs: its version is the package's, and it checks
// the installed example configuration.
func TestInstalledTree(t *testing.T) {
	t.Parallel()
	root := install(t)
	unit, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/enginehealth.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nExecStart=/usr/bin/enginehealth run --config /etc/enginehealth/enginehealth.yaml\n") ||
		!strings.Contains(string(unit), "\nExecStopPost=-/usr/bin/enginehealth release-lease --config /etc/enginehealth/enginehealth.yaml\n") {
		t.Fatalf("the packaged unit does not run /usr/bin/enginehealth (run, and release-lease after a stop):\n%s", unit)
	}
	dropIn, err := os.ReadFile(filepath.Join(root, "usr/share/doc/enginehealth/examples/engine-wait-enginehealth.conf"))
	if err != nil || !strings.Contains(string(dropIn), "ExecStartPre=/usr/bin/enginehealth wait ready") {
		t.Fatalf("the packaged drop-in: %v\n%s", err, dropIn)
	}
	// The base system the unit needs besides the package.
	targets, err := filepath.Glob("/usr/lib/systemd/system/*.target")
	if err != nil || len(targets) == 0 {
		t.Fatalf("systemd's targets: %v", err)
	}
	for _, f := range append(targets, "/bin/kill") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	analyze := need(t, "systemd-analyze", "systemd")
	if out, err := exec.Command(analyze, "verify", "--root="+root, "/usr/lib/systemd/system/enginehealth.service").CombinedOutput(); err != nil {
		t.Fatalf("systemd-analyze verify --root: %v\n%s", err, out)
	}

	bin := filepath.Join(root, "usr/bin/enginehealth")
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Version, Commit string
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Version != testVersion || v.Commit != "0123abc" {
		t.Fatalf("the installed binary's version: %s %v", out, err)
	}
	// The installed example configuration is valid once the variable its
	// database.dsn_env names is set (as /etc/default/enginehealth would),
	// and says which key is missing while it is not.
	cfg := filepath.Join(root, "etc/enginehealth/enginehealth.yaml")
	check := exec.Command(bin, "config", "check", "--config", cfg)
	check.Env = append(os.Environ(), "ENGINEHEALTH_DSN=")
	out, err = check.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "database.dsn_env: environment variable ENGINEHEALTH_DSN is not set") {
		t.Fatalf("config check of the installed example without its DSN: %v\n%s", err, out)
	}
	check = exec.Command(bin, "config", "check", "--config", cfg)
	check.Env = append(os.Environ(), "ENGINEHEALTH_DSN=postgres://enginehealth@db.example.net/engines")
	if out, err := check.CombinedOutput(); err != nil || !strings.Contains(string(out), ": valid") {
		t.Fatalf("config check of the installed example: %v\n%s", err, out)
	}
}

// install extracts the .deb into a new throw-away root (dpkg -x: what
// dpkg -i unpacks, without a real system) and returns the root.
func install(t *testing.T) string {
	t.Helper()
	deb, _ := packages(t)
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	return root
}

// TestInstalledNodeBecomesReady follows docs/install.md from a clean
// shell: the packaged example tables are created in a database, the
// installed example configuration is pointed at that database (through
// the variable its database.dsn_env names, as /etc/default/enginehealth
// sets it) and at etcd, and the installed binary runs: it migrates,
// becomes master and Ready (`enginehealth wait ready`, the engine
// drop-in's check, exits 0), and stops cleanly on SIGTERM.
func TestInstalledNodeBecomesReady(t *testing.T) {
	t.Parallel()
	root := install(t)
	dsn := pg.NewDatabase(t)
	tables, err := os.ReadFile(filepath.Join(root, "usr/share/doc/enginehealth/examples/example-tables.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(string(tables)); err != nil {
		t.Fatalf("example-tables.sql: %v", err)
	}
	// Point the example at this etcd and a free port: what an operator
	// edits (endpoints, listen), nothing else.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := ln.Addr().String()
	ln.Close()
	example, err := os.ReadFile(filepath.Join(root, "etc/enginehealth/enginehealth.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(example), "endpoints: [127.0.0.1:2379]", "endpoints: ["+etcd.Endpoint+"]", 1)
	cfg = strings.Replace(cfg, "listen: 127.0.0.1:8642", "listen: "+api, 1)
	cfg = strings.Replace(cfg, "prefix: /enginehealth/", "prefix: /"+t.Name()+"/", 1)
	if cfg == string(example) || strings.Count(cfg, etcd.Endpoint) != 1 || !strings.Contains(cfg, "listen: "+api) {
		t.Fatalf("the installed example no longer has the lines this test edits:\n%s", example)
	}
	path := filepath.Join(root, "etc/enginehealth/enginehealth.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "usr/bin/enginehealth")
	env := append(os.Environ(), "ENGINEHEALTH_DSN="+dsn)
	daemon := exec.Command(bin, "run", "--config", path)
	daemon.Env = env
	var log testkit.Buffer
	daemon.Stdout, daemon.Stderr = &log, &log
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- daemon.Wait() }()
	defer func() {
		if t.Failed() {
			t.Logf("the installed daemon's log:\n%s", log.String())
		}
	}()
	wait := exec.Command(bin, "wait", "ready", "--api", api, "--timeout", "60s")
	wait.Env = env
	if out, err := wait.CombinedOutput(); err != nil {
		_ = daemon.Process.Kill()
		t.Fatalf("enginehealth wait ready: %v\n%s", err, out)
	}
	status := exec.Command(bin, "status", "--api", api, "-o", "json")
	out, err := status.CombinedOutput()
	var report struct {
		Status struct {
			Master struct{ Name string } `json:"master"`
			Build  struct{ Version string }
		} `json:"status"`
	}
	st := &report.Status
	if err != nil || json.Unmarshal(out, &report) != nil || st.Master.Name != "node-a" || st.Build.Version != testVersion {
		t.Fatalf("enginehealth status: %v\n%s", err, out)
	}
	if err := daemon.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the installed daemon exited with %v after SIGTERM", err)
		}
	case <-ctx.Done():
		_ = daemon.Process.Kill()
		t.Fatal("the installed daemon still runs 30 s after SIGTERM")
	}
}
