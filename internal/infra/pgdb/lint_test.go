package pgdb_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
)

// The upgrade rule (docs/operations.md, Upgrades and migrations): during
// a rolling upgrade the previous release runs beside the new one against
// the new schema, so a migration only adds (expand). What takes away or
// changes (contract: a DROP, a RENAME, a type change, a NOT NULL an older
// binary's writes would break) waits for a release after every node runs
// the one that stopped using it, and says so in a line
// "-- contract: after version N" (N: the migration whose release every
// node must run first).
var contract = []struct {
	what string
	re   *regexp.Regexp
}{
	{"drops", regexp.MustCompile(`(?i)\bDROP\b`)},
	{"renames", regexp.MustCompile(`(?i)\bRENAME\b`)},
	{"changes a type", regexp.MustCompile(`(?i)\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b`)},
	{"sets NOT NULL on an existing column", regexp.MustCompile(`(?i)\bSET\s+NOT\s+NULL\b`)},
}

// addColumn is one ADD COLUMN clause, up to the next clause or statement.
var addColumn = regexp.MustCompile(`(?is)\bADD\s+COLUMN\b[^,;]*`)

// beforeTheRule: migrations written while no two releases ever ran side by
// side (before there were packages); they are not linted.
const beforeTheRule = 14

var contractLine = regexp.MustCompile(`(?m)^-- contract: after version (\d+)$`)

// TestMigrationsOnlyAdd pins the upgrade rule: every migration after
// beforeTheRule only adds, unless it is marked a contract step after an
// earlier version.
func TestMigrationsOnlyAdd(t *testing.T) {
	ms, err := pgdb.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0 // migrations before the rule the lint would stop: it is not blind
	for _, m := range ms {
		if m.Version <= beforeTheRule {
			if len(lint(m.SQL)) > 0 {
				seen++
			}
			continue
		}
		if problems := lint(m.SQL); len(problems) > 0 {
			marked := contractLine.FindStringSubmatch(m.SQL)
			if marked == nil {
				t.Errorf("%s: %s: an older release running beside it would break; mark it \"-- contract: after version N\" and ship it a release after every node runs N",
					m.Name, strings.Join(problems, "; "))
				continue
			}
			if n, _ := strconv.Atoi(marked[1]); n >= m.Version {
				t.Errorf("%s: a contract step after version %s, which is not earlier than itself", m.Name, marked[1])
			}
		}
	}
	if seen < 3 {
		t.Fatalf("the lint stops %d of the migrations before the rule, want the 3 that drop or rename (0003, 0007, 0011)", seen)
	}
}

// TestLint: what the rule catches, and what it lets through.
func TestLint(t *testing.T) {
	for sql, want := range map[string]string{
		"ALTER TABLE nodes ADD COLUMN zone text NOT NULL DEFAULT '';": "",
		"ALTER TABLE nodes ADD COLUMN zone text;":                     "",
		"CREATE TABLE t (a int NOT NULL);":                            "",
		"CREATE INDEX ON t (a); -- DROP nothing here":                 "",
		"ALTER TABLE nodes ADD COLUMN zone text NOT NULL;":            "adds a NOT NULL column without a default",
		"ALTER TABLE nodes DROP COLUMN zone;":                         "drops",
		"DROP INDEX events_run_brin;":                                 "drops",
		"ALTER TABLE nodes RENAME COLUMN a TO b;":                     "renames",
		"ALTER TABLE nodes ALTER COLUMN a TYPE bigint;":               "changes a type",
		"ALTER TABLE nodes ALTER COLUMN a SET DATA TYPE bigint;":      "changes a type",
		"ALTER TABLE nodes ALTER COLUMN a SET NOT NULL;":              "sets NOT NULL on an existing column",
	} {
		got := strings.Join(lint(sql), "; ")
		if !strings.HasPrefix(got, want) || (want == "") != (got == "") {
			t.Errorf("%q: %q, want %q", sql, got, want)
		}
	}
}

// lint returns what a migration's statements do that an older release
// running beside it could not bear (comments left out).
func lint(sql string) []string {
	var code []string
	for _, l := range strings.Split(sql, "\n") {
		if i := strings.Index(l, "--"); i >= 0 {
			l = l[:i]
		}
		code = append(code, l)
	}
	text := strings.Join(code, "\n")
	var problems []string
	for _, c := range contract {
		if m := c.re.FindString(text); m != "" {
			problems = append(problems, fmt.Sprintf("%s (%q)", c.what, strings.Join(strings.Fields(m), " ")))
		}
	}
	notNull, hasDefault := regexp.MustCompile(`(?i)\bNOT\s+NULL\b`), regexp.MustCompile(`(?i)\bDEFAULT\b`)
	for _, clause := range addColumn.FindAllString(text, -1) {
		if notNull.MatchString(clause) && !hasDefault.MatchString(clause) {
			problems = append(problems, fmt.Sprintf("adds a NOT NULL column without a default (%q)", strings.Join(strings.Fields(clause), " ")))
		}
	}
	return problems
}
