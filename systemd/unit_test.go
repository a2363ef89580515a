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

// analyzer returns systemd-analyze's path.
func analyzer(t *testing.T) string {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze not found (Debian: apt-get install -y systemd): %v", err)
	}
	return analyze
}

// install writes unit text as dir/name with the daemon's path pointed at
// an existing binary (this test's), and returns the file's path.
func install(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.ReplaceAll(data, []byte("/usr/local/bin/enginehealth"), []byte(self)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// variants returns the shipped unit and the unit with its commented
// LoadCredential= lines turned on, as an operator who uses systemd
// credentials would.
func variants(t *testing.T) map[string][]byte {
	t.Helper()
	unit, err := os.ReadFile("enginehealth.service")
	if err != nil {
		t.Fatal(err)
	}
	creds := regexp.MustCompile(`(?m)^#(LoadCredential=)`)
	if n := len(creds.FindAll(unit, -1)); n < 5 {
		t.Fatalf("unit has %d commented LoadCredential= lines, want the DSN, tokens, etcd password, etcd key and API key", n)
	}
	return map[string][]byte{"as shipped": unit, "with credentials": creds.ReplaceAll(unit, []byte("$1"))}
}

// TestUnitVerifies runs systemd-analyze verify on the shipped unit, with
// ExecStart pointed at an existing binary. verify only warns on unknown
// keys, so any output fails the test.
func TestUnitVerifies(t *testing.T) {
	analyze := analyzer(t)
	for name, unit := range variants(t) {
		t.Run(name, func(t *testing.T) { verifyUnit(t, analyze, unit) })
	}
}

func verifyUnit(t *testing.T, analyze string, unit []byte) {
	for _, want := range []string{"Type=notify", "WatchdogSec=", "Restart=on-failure", "EnvironmentFile=", "NoNewPrivileges=yes", "ProtectSystem=strict",
		"WatchdogSignal=SIGTERM", "PrivateMounts=yes", "RemoveIPC=yes", "ProcSubset=pid", "RestartPreventExitStatus=2", "ExecReload=/bin/kill -HUP $MAINPID",
		"StateDirectory=enginehealth\n", "\nExecStopPost=-/usr/local/bin/enginehealth release-lease --config /etc/enginehealth/enginehealth.yaml\n"} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("unit lacks %s", want)
		}
	}
	path := install(t, t.TempDir(), "enginehealth.service", unit)
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestEngineDropInVerifies: the drop-in for an engine's unit passes
// systemd-analyze verify on an example engine unit beside the sidecar's,
// and verify does read it (a bogus key in a second drop-in is reported).
func TestEngineDropInVerifies(t *testing.T) {
	analyze := analyzer(t)
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
	dir := t.TempDir()
	unit, err := os.ReadFile("enginehealth.service")
	if err != nil {
		t.Fatal(err)
	}
	install(t, dir, "enginehealth.service", unit)
	install(t, dir, "my-engine.service", []byte("[Unit]\nDescription=an engine\n[Service]\nExecStart=/usr/local/bin/enginehealth version\n[Install]\nWantedBy=multi-user.target\n"))
	install(t, dir, "my-engine.service.d/wait-enginehealth.conf", dropIn)
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
	install(t, dir, "my-engine.service.d/zz-bogus.conf", []byte("[Service]\nBogusKey=1\n"))
	if out := verify(); !strings.Contains(out, "BogusKey") {
		t.Fatalf("systemd-analyze verify does not read the drop-ins: %q", out)
	}
}

// TestUnitExposure: systemd-analyze security rates the sidecar's sandbox
// at an overall exposure of at most 1.5 (0 is best, 10 worst).
func TestUnitExposure(t *testing.T) {
	analyze := analyzer(t)
	for name, unit := range variants(t) {
		t.Run(name, func(t *testing.T) { unitExposure(t, analyze, unit) })
	}
}

func unitExposure(t *testing.T, analyze string, unit []byte) {
	path := install(t, t.TempDir(), "enginehealth.service", unit)
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
