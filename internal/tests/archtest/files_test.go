package archtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binaryMagic: the first bytes of the executables and objects a build
// writes (ELF, Mach-O in both byte orders and fat, PE).
var binaryMagic = [][]byte{
	[]byte("\x7fELF"),
	{0xfe, 0xed, 0xfa, 0xce}, {0xfe, 0xed, 0xfa, 0xcf}, {0xce, 0xfa, 0xed, 0xfe}, {0xcf, 0xfa, 0xed, 0xfe}, {0xca, 0xfe, 0xba, 0xbe},
	[]byte("MZ"),
}

// TestNoTrackedBinaries fails when git tracks a build output: an
// executable or object file (a benchreport binary was committed twice),
// or a file with the executable bit that is not a script (#!).
func TestNoTrackedBinaries(t *testing.T) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse (this test reads the files git tracks: run it in a clone): %v", err)
	}
	root := strings.TrimSpace(string(top))
	out, err := exec.Command("git", "-C", root, "ls-files", "-s", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := 0
	for _, entry := range bytes.Split(out, []byte{0}) {
		if len(entry) == 0 {
			continue
		}
		// "<mode> <object> <stage>\t<path>"
		meta, path, ok := strings.Cut(string(entry), "\t")
		if !ok {
			t.Fatalf("git ls-files -s: %q", entry)
		}
		files++
		head := make([]byte, 4)
		f, err := os.Open(filepath.Join(root, path))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree, not committed yet
			}
			t.Fatal(err)
		}
		n, _ := f.Read(head)
		f.Close()
		head = head[:n]
		for _, m := range binaryMagic {
			if bytes.HasPrefix(head, m) {
				t.Errorf("%s is tracked and is an executable or object file (a build output): remove it and ignore it", path)
			}
		}
		if strings.HasPrefix(meta, "100755") && !bytes.HasPrefix(head, []byte("#!")) {
			t.Errorf("%s is tracked as executable but is no script (#!)", path)
		}
	}
	if files < 100 {
		t.Fatalf("git tracks %d files: not this repository?", files)
	}
}
