package leader

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDeposedLeaderTestBites runs TestDeposedEtcdLeaderCannotExtendTrust
// in a faultinject build with the confirmation turned off (EH_UNSAFE=
// confirm: every answered keep-alive counts, as before the fix): it must
// fail, naming two masters acting at once. The deterministic test is not
// vacuous: it catches the violation the fault run saw.
func TestDeposedLeaderTestBites(t *testing.T) {
	cmd := exec.Command("go", "test", "-tags", "faultinject", "-count=1", "-run", "^TestDeposedEtcdLeaderCannotExtendTrust$", ".")
	cmd.Env = append(os.Environ(), "EH_UNSAFE=confirm")
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		t.Fatalf("with keep-alives counted unconfirmed, TestDeposedEtcdLeaderCannotExtendTrust passed:\n%s", out)
	case !strings.Contains(string(out), "UNSAFE BUILD, safety mechanisms turned off: confirm"):
		t.Fatalf("the child did not run the unsafe build (%v):\n%s", err, out)
	case !strings.Contains(string(out), "two masters acting at once"):
		t.Fatalf("with keep-alives counted unconfirmed, the test failed for another reason (%v):\n%s", err, out)
	}
}
