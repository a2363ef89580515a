package systemd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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
