package nodes

import (
	"errors"
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	for _, name := range []string{"a", "node-a", "Node_1.example", "0", strings.Repeat("x", 63)} {
		if err := ValidName(name); err != nil {
			t.Errorf("ValidName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{
		"", "-a", ".a", "_a", "a b", "a/b", "a\x00", "\x00x", "\xff", "é", "a\n", "a\x1b[2J",
		strings.Repeat("x", 64), strings.Repeat("x", 1000),
	} {
		err := ValidName(name)
		if !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidName(%q) = %v, want ErrInvalidName", name, err)
			continue
		}
		// The message quotes the name escaped: no raw control bytes.
		for _, c := range []byte(err.Error()) {
			if c < 0x20 || c >= 0x7f {
				t.Errorf("ValidName(%q): message has byte %#x: %s", name, c, err)
				break
			}
		}
		if len(err.Error()) > 300 {
			t.Errorf("ValidName of %d bytes: message of %d bytes", len(name), len(err.Error()))
		}
	}
}
