// Command pkgbuild builds the enginehealth packages with nfpm: for each
// architecture, the binary (cross-compiled, without cgo) and a staging
// directory (the systemd unit and the engine drop-in with their paths
// moved to /usr/bin, the man pages of docs/man gzipped, the shell
// completions), then dist/enginehealth_<version>_<arch>.deb and .rpm as
// nfpm.yaml lists them.
//
//	go run ./internal/tools/pkgbuild -version 0.1.0 -out dist
//
// make package runs it with the version, commit and build date make
// computes. It prints each package's path.
package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // the deb packager
	_ "github.com/goreleaser/nfpm/v2/rpm" // the rpm packager
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pkgbuild:", err)
		os.Exit(1)
	}
}

type options struct {
	version, commit, buildDate string
	out, repo                  string
	arches                     []string
}

func run() error {
	var o options
	var arches string
	flag.StringVar(&o.version, "version", "", "package version (required), e.g. 0.1.0 or 0.1.0~dev.abc1234")
	flag.StringVar(&o.commit, "commit", "", "the commit the binary says it was built from")
	flag.StringVar(&o.buildDate, "build-date", "", "the build date (RFC 3339) the binary says; also the packaged files' time")
	flag.StringVar(&o.out, "out", "dist", "output directory")
	flag.StringVar(&o.repo, "repo", ".", "the repository's root")
	flag.StringVar(&arches, "arch", "amd64,arm64", "Go architectures, comma-separated")
	flag.Parse()
	if o.version == "" || !startsWithDigit(o.version) {
		return fmt.Errorf("-version %q: want a version that starts with a digit (Debian's rule), e.g. 0.1.0", o.version)
	}
	o.arches = strings.Split(arches, ",")
	var err error
	if o.repo, err = filepath.Abs(o.repo); err != nil {
		return err
	}
	if o.out, err = filepath.Abs(o.out); err != nil {
		return err
	}
	mtime := time.Now().UTC()
	if o.buildDate != "" {
		if mtime, err = time.Parse(time.RFC3339, o.buildDate); err != nil {
			return fmt.Errorf("-build-date: %w", err)
		}
	}
	// The completions come from a binary that runs here.
	host := filepath.Join(o.out, "stage", "host", "enginehealth")
	if err := o.build(runtime.GOARCH, host); err != nil {
		return err
	}
	completions := map[string][]byte{}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		b, err := exec.Command(host, "completion", shell).Output()
		if err != nil {
			return fmt.Errorf("enginehealth completion %s: %w", shell, err)
		}
		completions[shell] = b
	}
	for _, arch := range o.arches {
		stage := filepath.Join(o.out, "stage", arch)
		if err := o.stage(arch, stage, completions); err != nil {
			return fmt.Errorf("%s: %w", arch, err)
		}
		for _, format := range []string{"deb", "rpm"} {
			p, err := o.pack(format, arch, stage, mtime)
			if err != nil {
				return fmt.Errorf("%s %s: %w", arch, format, err)
			}
			fmt.Println(p)
		}
	}
	// dist/ holds the packages only.
	return os.RemoveAll(filepath.Join(o.out, "stage"))
}

func startsWithDigit(s string) bool { return s != "" && s[0] >= '0' && s[0] <= '9' }

// build cross-compiles the daemon for arch into path.
func (o options) build(arch, path string) error {
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s -X main.buildDate=%s", o.version, o.commit, o.buildDate)
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", path, "./cmd/enginehealth")
	cmd.Dir = o.repo
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for linux/%s: %w", arch, err)
	}
	return nil
}

// stage fills dir with what the packages hold besides files of the
// repository taken as they are.
func (o options) stage(arch, dir string, completions map[string][]byte) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for _, d := range []string{"man", "completions"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := o.build(arch, filepath.Join(dir, "enginehealth")); err != nil {
		return err
	}
	// The repository's unit names /usr/local/bin (an install from
	// source); the packages install /usr/bin.
	for _, f := range []string{"enginehealth.service", "engine-wait-enginehealth.conf"} {
		b, err := os.ReadFile(filepath.Join(o.repo, "systemd", f))
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte("/usr/local/bin/enginehealth")) {
			return fmt.Errorf("systemd/%s does not name /usr/local/bin/enginehealth any more: update pkgbuild", f)
		}
		b = bytes.ReplaceAll(b, []byte("/usr/local/bin/enginehealth"), []byte("/usr/bin/enginehealth"))
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return err
		}
	}
	pages, err := filepath.Glob(filepath.Join(o.repo, "docs", "man", "*.1"))
	if err != nil {
		return err
	}
	if len(pages) == 0 {
		return errors.New("no man pages in docs/man")
	}
	for _, p := range pages {
		if err := gzipFile(p, filepath.Join(dir, "man", filepath.Base(p)+".gz")); err != nil {
			return err
		}
	}
	for shell, b := range completions {
		if err := os.WriteFile(filepath.Join(dir, "completions", "enginehealth."+shell), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// gzipFile compresses src into dst as Debian wants man pages: best
// compression, no name or time in the header (reproducible).
func gzipFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, buf.Bytes(), 0o644)
}

// changelog writes the packages' changelog to dst: changelog.yml, whose
// newest entry is the package's version; for any other version (a
// development build), an entry for it first, naming its commit.
func (o options) changelog(src, dst string, date time.Time) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	newest := regexp.MustCompile(`(?m)^- semver: (\S+)\n  date: (\S+)$`).FindSubmatch(b)
	if newest == nil {
		return fmt.Errorf("%s has no entry (- semver: …, then   date: …)", src)
	}
	if string(newest[1]) != o.version {
		// Later than the newest entry (Debian wants each entry newer).
		if last, err := time.Parse(time.RFC3339, string(newest[2])); err == nil && !date.After(last) {
			date = last.Add(time.Second)
		}
		commit := o.commit
		if commit == "" {
			commit = "an unknown commit"
		}
		entry := fmt.Sprintf(`- semver: %s
  date: %s
  packager: enginehealth maintainers <maintainers@enginehealth.dev>
  deb:
    urgency: medium
    distributions: [unstable]
  changes:
    - note: "A build of %.40s, after %s."
`, o.version, date.UTC().Format(time.RFC3339), commit, newest[1])
		b = append([]byte(entry), b...)
	}
	return os.WriteFile(dst, b, 0o644)
}

// pack builds one package of format for arch from nfpm.yaml.
func (o options) pack(format, arch, stage string, mtime time.Time) (string, error) {
	vars := map[string]string{
		"ARCH": arch, "VERSION": o.version, "STAGE": stage, "REPO": o.repo,
		"PKGDIR":    filepath.Join(o.repo, "internal", "tools", "pkgbuild"),
		"CHANGELOG": filepath.Join(stage, "changelog.yml"),
	}
	if err := o.changelog(filepath.Join(vars["PKGDIR"], "changelog.yml"), vars["CHANGELOG"], mtime); err != nil {
		return "", err
	}
	// Every ${NAME} of the file, whatever the field (nfpm expands some
	// fields only); an unknown one is an error, not an empty string.
	raw, err := os.ReadFile(filepath.Join(vars["PKGDIR"], "nfpm.yaml"))
	if err != nil {
		return "", err
	}
	var unknown []string
	text := os.Expand(string(raw), func(k string) string {
		v, ok := vars[k]
		if !ok {
			unknown = append(unknown, k)
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("nfpm.yaml names unknown variables %v", unknown)
	}
	cfg, err := nfpm.ParseWithEnvMapping(strings.NewReader(text), func(k string) string { return "$" + k })
	if err != nil {
		return "", err
	}
	info, err := cfg.Get(format)
	if err != nil {
		return "", err
	}
	info = nfpm.WithDefaults(info)
	info.MTime = mtime
	if err := nfpm.Validate(info); err != nil {
		return "", err
	}
	p, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	path := filepath.Join(o.out, fmt.Sprintf("enginehealth_%s_%s.%s", o.version, arch, format))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := p.Package(info, f); err != nil {
		_ = f.Close()
		return "", err
	}
	return path, f.Close()
}
