package systemd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestUnitVerifies runs systemd-analyze verify on the shipped unit, with
// ExecStart pointed at an existing binary. verify only warns on unknown
// keys, so any output fails the test.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze not found (Debian: apt-get install -y systemd): %v", err)
	}
	unit, err := os.ReadFile("enginehealth.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify", "WatchdogSec=", "Restart=on-failure", "EnvironmentFile=", "NoNewPrivileges=yes", "ProtectSystem=strict",
		"WatchdogSignal=SIGTERM", "PrivateMounts=yes", "RemoveIPC=yes", "ProcSubset=pid", "RestartPreventExitStatus=2"} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("unit lacks %s", want)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "enginehealth.service")
	unit = bytes.ReplaceAll(unit, []byte("/usr/local/bin/enginehealth"), []byte(self))
	if err := os.WriteFile(path, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestEngineDropInVerifies: the drop-in for an engine's unit passes
// systemd-analyze verify on an example engine unit beside the sidecar's,
// and verify does read it (a bogus key in a second drop-in is reported).
func TestEngineDropInVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze not found (Debian: apt-get install -y systemd): %v", err)
	}
	dropIn, err := os.ReadFile("engine-wait-enginehealth.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"After=enginehealth.service", "Requires=enginehealth.service", "BindsTo=enginehealth.service",
		"ExecStartPre=/usr/local/bin/enginehealth wait ready", "TimeoutStartSec=infinity"} {
		if !bytes.Contains(dropIn, []byte(want)) {
			t.Errorf("drop-in lacks %s", want)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), bytes.ReplaceAll(data, []byte("/usr/local/bin/enginehealth"), []byte(self)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	unit, err := os.ReadFile("enginehealth.service")
	if err != nil {
		t.Fatal(err)
	}
	write("enginehealth.service", unit)
	write("my-engine.service", []byte("[Unit]\nDescription=an engine\n[Service]\nExecStart="+self+" -test.run=^$\n[Install]\nWantedBy=multi-user.target\n"))
	write("my-engine.service.d/wait-enginehealth.conf", dropIn)
	verify := func() string {
		out, err := exec.Command(analyze, "verify", filepath.Join(dir, "my-engine.service")).CombinedOutput()
		if err != nil {
			t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out := verify(); out != "" {
		t.Fatalf("systemd-analyze verify: %s", out)
	}
	write("my-engine.service.d/zz-bogus.conf", []byte("[Service]\nBogusKey=1\n"))
	if out := verify(); !strings.Contains(out, "BogusKey") {
		t.Fatalf("systemd-analyze verify does not read the drop-ins: %q", out)
	}
}

// TestUnitExposure: systemd-analyze security rates the sidecar's sandbox
// at an overall exposure of at most 1.5 (0 is best, 10 worst).
func TestUnitExposure(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze not found (Debian: apt-get install -y systemd): %v", err)
	}
	unit, err := os.ReadFile("enginehealth.service")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "enginehealth.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/local/bin/enginehealth"), []byte(self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "security", "--offline=true", path).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for enginehealth.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	level, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil || level > 1.5 {
		t.Fatalf("exposure %s, want at most 1.5\n%s", m[1], out)
	}
	t.Logf("exposure %.1f", level)
}
