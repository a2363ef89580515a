package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// unfenced matches a write or transaction that does not come from the
// fence: a transaction of its own, or a statement run on a pool.
var unfenced = regexp.MustCompile(`pgdb\.InTx\(|\b[dD][bB]\.(ExecContext|Exec|BeginTxx?|Beginx?|MustExec|NamedExecContext)\(`)

// TestMasterWritesAreFenced: the packages that write engine tables and
// the master's records (recovery, health) write only in a leader.Tx,
// which only the fence makes, for a trusted office.
func TestMasterWritesAreFenced(t *testing.T) {
	for _, dir := range []string{"recovery", "health"} {
		files, err := filepath.Glob(filepath.Join("..", "..", "..", dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(src), "\n") {
				if unfenced.MatchString(line) {
					t.Errorf("%s:%d writes outside a fenced transaction: %s", f, i+1, strings.TrimSpace(line))
				}
			}
		}
	}
}
