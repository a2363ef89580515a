package main

import (
	"runtime"
	"runtime/debug"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/app/metrics"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
)

// buildDate and commit are set at build time with -ldflags "-X
// main.buildDate=… -X main.commit=…" (RFC 3339; a git revision, "-dirty"
// appended for a tree with changes): make sets them. Without commit, the
// revision the Go toolchain stamped, if any.
var buildDate, commit string

// buildInfo says what this binary was built from: the version (ldflags),
// the commit and its time (what the Go toolchain records of the checkout),
// the build date, the Go version and platform, and the newest migration.
func buildInfo() apitype.Build {
	b := apitype.Build{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if t, err := time.Parse(time.RFC3339, buildDate); err == nil {
		b.BuildDate = t.UTC()
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.time":
				if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
					b.CommitTime = t.UTC()
				}
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && b.Commit != "" {
			b.Commit += "-dirty"
		}
	}
	if commit != "" && commit != "-dirty" {
		b.Commit = commit
	}
	if ms, err := pgdb.Migrations(); err == nil && len(ms) > 0 {
		b.SchemaVersion = ms[len(ms)-1].Version
	}
	return b
}

// buildLabels are b as the labels of enginehealth_build_info.
func buildLabels(b apitype.Build) *metrics.BuildLabels {
	l := &metrics.BuildLabels{Version: b.Version, Commit: b.Commit, GoVersion: b.GoVersion, Platform: b.Platform, SchemaVersion: b.SchemaVersion}
	if !b.BuildDate.IsZero() {
		l.BuildDate = b.BuildDate.Format(time.RFC3339)
	}
	return l
}
