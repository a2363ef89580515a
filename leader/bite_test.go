package leader

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// bites runs test in a faultinject build with mechanism turned off and
// returns its output; it must fail.
func bites(t *testing.T, test, mechanism string) string {
	t.Helper()
	cmd := exec.Command("go", "test", "-tags", "faultinject", "-count=1", "-run", "^"+test+"$", ".")
	cmd.Env = append(os.Environ(), "EH_UNSAFE="+mechanism)
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		t.Fatalf("with %s off, %s passed:\n%s", mechanism, test, out)
	case !strings.Contains(string(out), "UNSAFE BUILD, safety mechanisms turned off: "+mechanism):
		t.Fatalf("the child did not run the unsafe build (%v):\n%s", err, out)
	}
	return string(out)
}

// TestRevokedHolderTestBites runs TestNewMasterWaitsOutRevokedHolder with
// the wait turned off (EH_UNSAFE=wait: a new master acts as soon as it
// takes office, as before the fix): it must fail, the new master acting
// inside the old one's window.
func TestRevokedHolderTestBites(t *testing.T) {
	if out := bites(t, "TestNewMasterWaitsOutRevokedHolder", "wait"); !strings.Contains(out, "while the old one trusts its window") {
		t.Fatalf("with the wait off, the test failed for another reason:\n%s", out)
	}
}

// TestDeposedLeaderTestBites runs TestDeposedEtcdLeaderCannotExtendTrust
// in a faultinject build with the confirmation turned off (EH_UNSAFE=
// confirm: every answered keep-alive counts, as before the fix): it must
// fail, naming two masters acting at once. The deterministic test is not
// vacuous: it catches the violation the fault run saw.
func TestDeposedLeaderTestBites(t *testing.T) {
	if out := bites(t, "TestDeposedEtcdLeaderCannotExtendTrust", "confirm"); !strings.Contains(out, "two masters acting at once") {
		t.Fatalf("with keep-alives counted unconfirmed, the test failed for another reason:\n%s", out)
	}
}
