package configs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/enginehealth/enginehealth/nodes"
)

// Roles of the API's operators: read may use every read (GET /v1/* and
// the status page, needed only with api.auth_reads), operate everything.
const (
	RoleRead    = "read"
	RoleOperate = "operate"
	// LegacyOperator is the name of the operator that api.token_file or
	// api.token_env configures: one token, role operate.
	LegacyOperator = "operator"
)

// Operator is one named API token, known by its SHA-256 only.
type Operator struct {
	// Name is recorded as the actor of the operator's actions ("alice
	// (operator)"); the rule of node names.
	Name   string
	SHA256 [sha256.Size]byte
	// Role is RoleRead or RoleOperate.
	Role string
}

// tokenKeys are the keys of an entry of the tokens file.
var tokenKeys = []string{"name", "sha256", "role"}

// resolveOperators sets c.API.Operators from api.tokens_file, or from the
// single token (api.token_file or api.token_env) as the operator
// LegacyOperator with role operate. Both at once is a problem: one file
// says who the operators are.
func (c *Config) resolveOperators(v *validator, dir string, lookupEnv func(string) (string, bool)) {
	a := &c.API
	switch {
	case a.TokensFile != "" && (a.TokenFile != "" || a.TokenEnv != ""):
		v.add("api.tokens_file", "set either api.tokens_file or api.token_file/api.token_env, not both: give the single token an entry of its own in the tokens file ({name: %s, sha256: <its hash>, role: %s})",
			LegacyOperator, RoleOperate)
	case a.TokensFile != "":
		file := v.filePath("api.tokens_file", a.TokensFile, dir, lookupEnv)
		if file == "" {
			return
		}
		ops, problems := loadTokensFile(file)
		for _, p := range problems {
			v.add("api.tokens_file", "%s", p)
		}
		if len(problems) == 0 {
			a.Operators = ops
		}
	case a.Token != "":
		a.Operators = []Operator{{Name: LegacyOperator, SHA256: sha256.Sum256([]byte(a.Token)), Role: RoleOperate}}
	}
}

// tokenProblem is one thing wrong with a tokens file, at a line of it
// (0: the whole file).
type tokenProblem struct {
	line int
	msg  string
}

// loadTokensFile reads and checks the tokens file at path. Its problems
// name the file and a line of it, never its content: a value in the
// wrong place may be a token.
func loadTokensFile(path string) ([]Operator, []string) {
	data, err := readFile(path, MaxSecretBytes)
	if err != nil {
		return nil, []string{fmt.Sprintf("cannot read the tokens file: %v", err)}
	}
	ops, problems := parseTokens(data)
	out := make([]string, 0, len(problems))
	for _, p := range problems {
		if p.line > 0 {
			out = append(out, fmt.Sprintf("%s:%d: %s", pathText(path), p.line, p.msg))
		} else {
			out = append(out, fmt.Sprintf("%s: %s", pathText(path), p.msg))
		}
	}
	return ops, out
}

// parseTokens reads a tokens file: a YAML list of {name, sha256, role}.
func parseTokens(data []byte) ([]Operator, []tokenProblem) {
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a byte order mark is not part of the first entry
	if p := checkShape(data); p != nil {
		// Its path is made of the file's keys, which may be anything.
		return nil, []tokenProblem{{p.Line, p.Msg}}
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		// The parser's message may quote the file.
		return nil, []tokenProblem{{yamlProblem(nil, err).Line, "not valid YAML"}}
	}
	var body ast.Node
	for _, doc := range file.Docs {
		if doc.Body == nil {
			continue
		}
		if body != nil {
			return nil, []tokenProblem{{line(doc.Body), "a second YAML document: the tokens file is one list"}}
		}
		body = doc.Body
	}
	const want = "want a list of operators, each {name, sha256, role}"
	seq, ok := body.(*ast.SequenceNode)
	switch {
	case body == nil || isNull(body):
		return nil, []tokenProblem{{0, "no operators: " + want}}
	case !ok:
		return nil, []tokenProblem{{line(body), want + ", got " + shape(body)}}
	case len(seq.Values) == 0:
		return nil, []tokenProblem{{line(body), "an empty list: " + want}}
	}
	var (
		ops      []Operator
		problems []tokenProblem
		names    = map[string]int{}
		hashes   = map[[sha256.Size]byte]int{}
	)
	for i, n := range seq.Values {
		op, entryProblems := parseOperator(n, fmt.Sprintf("[%d]", i))
		problems = append(problems, entryProblems...)
		if len(entryProblems) > 0 {
			continue
		}
		if j, dup := names[op.Name]; dup {
			problems = append(problems, tokenProblem{line(n), fmt.Sprintf("[%d].name: the name of [%d] (line %d) again: one entry per operator", i, j, line(seq.Values[j]))})
		} else {
			names[op.Name] = i
		}
		if j, dup := hashes[op.SHA256]; dup {
			problems = append(problems, tokenProblem{line(n), fmt.Sprintf("[%d].sha256: the hash of [%d] (line %d) again: one token, one operator", i, j, line(seq.Values[j]))})
		} else {
			hashes[op.SHA256] = i
		}
		ops = append(ops, op)
	}
	return ops, problems
}

// parseOperator reads one entry of the tokens file, at path ("[2]").
func parseOperator(n ast.Node, path string) (Operator, []tokenProblem) {
	var entries []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		entries = m.Values
	case *ast.MappingValueNode:
		entries = []*ast.MappingValueNode{m}
	default:
		return Operator{}, []tokenProblem{{line(n), path + ": want a mapping {name, sha256, role}, got " + shape(n)}}
	}
	var problems []tokenProblem
	add := func(n ast.Node, format string, args ...any) {
		problems = append(problems, tokenProblem{line(n), path + fmt.Sprintf(format, args...)})
	}
	values := map[string]string{}
	for _, e := range entries {
		key, ok := scalarText(e.Key)
		switch {
		case !ok || !slices.Contains(tokenKeys, key):
			add(e.Key, ": unknown key (want %s)", strings.Join(tokenKeys, ", "))
			continue
		case hasKey(values, key):
			add(e.Key, ".%s: given twice", key)
			continue
		}
		s, ok := scalarText(e.Value)
		if _, tag := e.Value.(*ast.TagNode); !ok || tag {
			add(e.Value, ".%s: want a string, got %s", key, shape(e.Value))
			values[key] = ""
			continue
		}
		values[key] = s
	}
	for _, key := range tokenKeys {
		if !hasKey(values, key) {
			add(n, ".%s: required", key)
		}
	}
	if len(problems) > 0 {
		return Operator{}, problems
	}
	op := Operator{Name: values["name"], Role: values["role"]}
	if nodes.ValidName(op.Name) != nil {
		add(n, ".name: not a valid operator name: want 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	if h := values["sha256"]; !isSHA256(h) {
		add(n, ".sha256: %s", hashProblem(h))
	} else {
		_, _ = hex.Decode(op.SHA256[:], []byte(h))
	}
	if op.Role != RoleRead && op.Role != RoleOperate {
		add(n, ".role: want %s or %s", RoleRead, RoleOperate)
	}
	return op, problems
}

// isSHA256 reports whether s is a SHA-256 as sha256sum prints it: 64
// lowercase hex digits.
func isSHA256(s string) bool {
	return len(s) == 2*sha256.Size && !strings.ContainsFunc(s, func(r rune) bool { return !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') })
}

// hashProblem says what is wrong with a value that is no SHA-256, without
// quoting it (it may be the token itself).
func hashProblem(s string) string {
	if len(s) == 2*sha256.Size && isSHA256(strings.ToLower(s)) {
		return "not lowercase: write the hash as sha256sum prints it"
	}
	return fmt.Sprintf("not 64 lowercase hex digits (got %d characters): the SHA-256 of the token, from printf %%s \"$TOKEN\" | sha256sum, never the token itself", len(s))
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

func isNull(n ast.Node) bool {
	_, ok := n.(*ast.NullNode)
	return ok
}

// shape names what kind of YAML node n is, without its content.
func shape(n ast.Node) string {
	switch n.(type) {
	case nil, *ast.NullNode:
		return "nothing"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.TagNode:
		return "a YAML tag"
	case *ast.AnchorNode, *ast.AliasNode:
		return "an anchor or alias"
	}
	return "a single value"
}
