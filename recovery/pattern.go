package recovery

import (
	"fmt"
	"strings"

	"github.com/lib/pq"
)

// PGPattern rewrites a non_retryable pattern, written in Go's syntax (what
// config check compiles, and what a dry run matches), for PostgreSQL's ~
// (its advanced regular expressions), which matches it in the repair
// statement. The assertions whose escapes mean something else there are
// rewritten: \b (a backspace to PostgreSQL) to \y, \B (a backslash) to
// \Y, \z (unknown) to \Z. An escape with no same meaning in both — \Q…\E,
// \p{…}, \P, \C, \x, a digit (octal to Go, a back reference to
// PostgreSQL) — is an error that names it. Go refuses \b, \B and \z in a
// bracket expression, so they are assertions wherever they are found.
func PGPattern(pat string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		if c != '\\' || i+1 == len(pat) {
			b.WriteByte(c)
			continue
		}
		i++
		switch n := pat[i]; {
		case n == 'b':
			b.WriteString(`\y`)
		case n == 'B':
			b.WriteString(`\Y`)
		case n == 'z':
			b.WriteString(`\Z`)
		case strings.IndexByte("QEpPCx", n) >= 0 || n >= '0' && n <= '9':
			return "", fmt.Errorf(`\%c means something else to PostgreSQL, which matches the patterns (or nothing); write the characters themselves or a bracket expression`, n)
		default:
			b.WriteByte('\\')
			b.WriteByte(n)
		}
	}
	return b.String(), nil
}

// pgPatterns are p's non_retryable patterns as PostgreSQL matches them
// (PGPattern; the configuration refuses those it cannot rewrite, which
// are passed as they are).
func (p Policy) pgPatterns() pq.StringArray {
	out := make(pq.StringArray, len(p.NonRetryable))
	for i, pat := range p.NonRetryable {
		if pg, err := PGPattern(pat); err == nil {
			out[i] = pg
		} else {
			out[i] = pat
		}
	}
	return out
}
