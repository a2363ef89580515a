package recovery

import (
	"fmt"
	"strings"

	"github.com/lib/pq"
)

// PGPattern rewrites a non_retryable pattern, written in Go's syntax (what
// config check compiles, and what a dry run matches), for PostgreSQL's ~
// (its advanced regular expressions), which matches it in the repair
// statement, so that both match the same texts:
//   - the assertions whose escapes mean something else there: \b (a
//     backspace to PostgreSQL) becomes \y, \B (a backslash) \Y, \z \Z;
//   - "." outside brackets becomes [^\n]: Go's dot does not match a
//     newline, PostgreSQL's does (an engine's error text may be a stack
//     trace of many lines).
//
// What has no same meaning in both is an error that names it: the escapes
// \Q…\E, \p{…}, \P, \C, \x and digits (octal to Go, a back reference
// to PostgreSQL); flag groups other than a leading (?i) (PostgreSQL takes
// options at the start only, and (?s), (?m), (?U) mean otherwise); and
// [. and [= in a bracket expression (collating elements to PostgreSQL).
// Go refuses \b, \B and \z in a bracket expression, so they are
// assertions wherever they are found.
func PGPattern(pat string) (string, error) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		if c == '\\' && i+1 < len(pat) {
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
			continue
		}
		if inClass {
			switch {
			case c == '[' && i+1 < len(pat) && (pat[i+1] == '.' || pat[i+1] == '='):
				return "", fmt.Errorf("[%c in a bracket expression is a collating element to PostgreSQL and two characters to Go; write \\[ for a bracket", pat[i+1])
			case c == '[' && i+1 < len(pat) && pat[i+1] == ':':
				// A class name, [:alpha:], copied whole.
				end := strings.Index(pat[i+2:], ":]")
				if end < 0 {
					b.WriteString(pat[i:])
					return b.String(), nil
				}
				b.WriteString(pat[i : i+2+end+2])
				i += 2 + end + 1
				continue
			case c == ']':
				inClass = false
			}
			b.WriteByte(c)
			continue
		}
		switch c {
		case '[':
			inClass = true
			b.WriteByte(c)
			// A ']' first (after a '^') is a member, not the end.
			if i+1 < len(pat) && pat[i+1] == '^' {
				i++
				b.WriteByte('^')
			}
			if i+1 < len(pat) && pat[i+1] == ']' {
				i++
				b.WriteByte(']')
			}
		case '.':
			b.WriteString(`[^\n]`)
		case '(':
			if i+1 < len(pat) && pat[i+1] == '?' && !(i+2 < len(pat) && pat[i+2] == ':') && !(i == 0 && strings.HasPrefix(pat, "(?i)")) {
				return "", fmt.Errorf("flag groups such as (?s), (?m) or (?P<name>…) mean something else to PostgreSQL, or nothing; only a leading (?i) is shared")
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
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
