package nodes

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrInvalidName means a name breaks the node naming rule (see ValidName).
var ErrInvalidName = errors.New("nodes: invalid name")

// maxNameLen is the longest node name, in bytes.
const maxNameLen = 63

// ValidName returns nil when name is a valid node name: 1 to 63 ASCII
// letters, digits, '.', '_' or '-', starting with a letter or digit. Node
// names appear in etcd keys, log lines, URLs and terminal tables; this is
// the rule of the configuration's node.name, and the API checks names it
// is given against it before they reach the database.
//
// The error wraps ErrInvalidName and quotes (escaped, truncated) the name.
func ValidName(name string) error {
	ok := len(name) >= 1 && len(name) <= maxNameLen
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			ok = false
		}
	}
	if ok {
		return nil
	}
	shown := name
	if len(shown) > maxNameLen+1 {
		shown = shown[:maxNameLen+1]
	}
	q := strconv.QuoteToASCII(shown)
	if len(shown) < len(name) {
		q += fmt.Sprintf(" (%d bytes in all)", len(name))
	}
	return fmt.Errorf("%w %s: want 1 to %d letters, digits, '.', '_' or '-', starting with a letter or digit",
		ErrInvalidName, q, maxNameLen)
}
