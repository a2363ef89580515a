package configs

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// hashOf is the tokens file's form of token's SHA-256.
func hashOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// withTokens writes a configuration whose api section is api (indented
// under "api:") and, when tokens is not nil, a tokens file next to it;
// it returns the configuration's path.
func withTokens(t *testing.T, api string, tokens *string) string {
	t.Helper()
	dir := t.TempDir()
	if tokens != nil {
		if err := os.WriteFile(filepath.Join(dir, "tokens.yaml"), []byte(*tokens), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(path, []byte(minimal+"api:\n"+api), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// secret is in every bad tokens file below, where a token could be: no
// error may quote it.
const secret = "hunter2-s3cr3t"

func TestTokensFile(t *testing.T) {
	t.Setenv("ENGINEHEALTH_DSN", "postgres://eh@127.0.0.1:5432/eh?sslmode=disable")
	alice, bob := hashOf("alice-token-0123456789"), hashOf("bob-token-0123456789")
	good := "# operators\n- {name: alice, sha256: " + alice + ", role: operate}\n- name: bob.ro\n  sha256: " + bob + "\n  role: read\n"
	cfg, err := Load(withTokens(t, "  tokens_file: tokens.yaml\n  auth_reads: true\n", &good))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.API.Operators) != 2 || !cfg.API.AuthReads {
		t.Fatalf("operators %+v, auth_reads %v", cfg.API.Operators, cfg.API.AuthReads)
	}
	a, b := cfg.API.Operators[0], cfg.API.Operators[1]
	if a.Name != "alice" || a.Role != RoleOperate || a.SHA256 != sha256.Sum256([]byte("alice-token-0123456789")) ||
		b.Name != "bob.ro" || b.Role != RoleRead || b.SHA256 != sha256.Sum256([]byte("bob-token-0123456789")) {
		t.Fatalf("operators read as %+v", cfg.API.Operators)
	}

	// A byte order mark (an editor on another system) is skipped.
	bom := "\ufeff" + good
	if cfg, err := Load(withTokens(t, "  tokens_file: tokens.yaml\n", &bom)); err != nil || len(cfg.API.Operators) != 2 {
		t.Fatalf("tokens file with a byte order mark: %v", err)
	}

	// The single token is the operator "operator", role operate.
	cfg, err = Parse([]byte(minimal+"api: {token_env: TOK}\n"), "t.yaml", env("ENGINEHEALTH_DSN", "postgres://h/db", "TOK", "the-single-token-0123"))
	if err != nil {
		t.Fatal(err)
	}
	if ops := cfg.API.Operators; len(ops) != 1 || ops[0].Name != LegacyOperator || ops[0].Role != RoleOperate ||
		ops[0].SHA256 != sha256.Sum256([]byte("the-single-token-0123")) {
		t.Fatalf("single token as %+v", ops)
	}
	// No token at all: no operators, mutations off, reads open.
	if cfg, err = Parse([]byte(minimal), "t.yaml", testEnv); err != nil || len(cfg.API.Operators) != 0 {
		t.Fatalf("no token: %+v %v", cfg.API.Operators, err)
	}

	// Only readers: valid, with a warning that mutations are off.
	readers := "- {name: bob, sha256: " + bob + ", role: read}\n"
	cfg, err = Load(withTokens(t, "  tokens_file: tokens.yaml\n", &readers))
	if err != nil || !strings.Contains(strings.Join(problemTexts(cfg.Warnings), "\n"), "no operator has role operate") {
		t.Fatalf("a tokens file of readers only: %v, warnings %v", err, cfg.Warnings)
	}
}

func problemTexts(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// TestBadTokensFiles: each bad tokens file is a problem at
// api.tokens_file, on the line of that key, that names the tokens file
// (and the line in it) and never quotes what the file holds.
func TestBadTokensFiles(t *testing.T) {
	t.Setenv("ENGINEHEALTH_DSN", "postgres://eh@127.0.0.1:5432/eh?sslmode=disable")
	h1, h2 := hashOf("one"), hashOf("two")
	entry := func(name, hash, role string) string {
		return "- {name: " + name + ", sha256: " + hash + ", role: " + role + "}\n"
	}
	str := func(s string) *string { return &s }
	cases := []struct {
		name   string
		api    string  // under api:
		tokens *string // the tokens file; nil: none written
		msg    string  // a fragment of the problem
		line   int     // of the tokens file, when the problem names one
	}{
		{"missing", "  tokens_file: tokens.yaml\n", nil, "cannot read the tokens file: ", 0},
		{"a directory", "  tokens_file: .\n", nil, "not a regular file (a directory)", 0},
		{"not YAML", "", str(entry("a", h1, "read") + "- {name: " + secret + ", sha256: [\n"), "not valid YAML", 2},
		{"a tab", "", str("-\tname: " + secret + "\n"), "not valid YAML", 1},
		{"a mapping, not a list", "", str("alice: {sha256: " + h1 + ", role: read}\n" + secret + ": x\n"), "want a list of operators", 1},
		{"one value", "", str(secret + "\n"), "want a list of operators, each {name, sha256, role}, got a single value", 1},
		{"an empty list", "", str("[]\n"), "an empty list", 1},
		{"an empty file", "", str("# nobody yet\n"), "no operators", 0},
		{"a second document", "", str(entry("a", h1, "read") + "---\n" + entry("b", h2, "read")), "a second YAML document", 3},
		{"an entry that is no mapping", "", str(entry("a", h1, "read") + "- " + secret + "\n"), "[1]: want a mapping {name, sha256, role}, got a single value", 2},
		{"an unknown key", "", str("- {name: a, sha256: " + h1 + ", role: read, " + secret + ": x}\n"), "[0]: unknown key (want name, sha256, role)", 1},
		{"a key twice", "", str("- name: a\n  sha256: " + h1 + "\n  role: read\n  role: operate\n"), "not valid YAML", 4},
		{"a missing role", "", str("- {name: a, sha256: " + h1 + "}\n"), "[0].role: required", 1},
		{"a null hash", "", str("- {name: a, sha256: , role: read}\n"), "[0].sha256: want a string, got nothing", 1},
		{"a list as a name", "", str("- {name: [" + secret + "], sha256: " + h1 + ", role: read}\n"), "[0].name: want a string, got a list", 1},
		{"a tag", "", str("- {name: !!str " + secret + ", sha256: " + h1 + ", role: read}\n"), "[0].name: want a string, got a YAML tag", 1},
		{"an anchor", "", str("- &x {name: a, sha256: " + h1 + ", role: read}\n- *x\n"), "anchors and aliases", 1},
		{"the token instead of its hash", "", str(entry("a", secret, "operate")), "[0].sha256: not 64 lowercase hex digits (got 14 characters): the SHA-256 of the token", 1},
		{"a hash in upper case", "", str(entry("a", strings.ToUpper(h1), "operate")), "[0].sha256: not lowercase", 1},
		{"a hash too long", "", str(entry("a", h1+"0", "operate")), "not 64 lowercase hex digits (got 65 characters)", 1},
		{"an unknown role", "", str(entry("a", h1, "admin-"+secret)), "[0].role: want read or operate", 1},
		{"an unsafe name", "", str(entry("\"a "+secret+"\"", h1, "read")), "[0].name: not a valid operator name", 1},
		{"a name too long", "", str(entry(strings.Repeat("a", 64), h1, "read")), "[0].name: not a valid operator name", 1},
		{"a name twice", "", str(entry("a", h1, "read") + entry("b", h2, "read") + entry("a", hashOf(secret), "operate")), "[2].name: the name of [0] (line 1) again", 3},
		{"a hash twice", "", str(entry("a", h1, "read") + entry("b", h1, "operate")), "[1].sha256: the hash of [0] (line 1) again", 2},
		{"both forms", "  token_env: TOK\n", str(entry("a", h1, "read")), "set either api.tokens_file or api.token_file/api.token_env, not both", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("TOK", "single-token-"+secret)
			api := c.api
			if !strings.Contains(api, "tokens_file") {
				api = "  tokens_file: tokens.yaml\n" + api
			}
			path := withTokens(t, api, c.tokens)
			_, err := Load(path)
			if err == nil {
				t.Fatalf("accepted: %v", c.tokens)
			}
			// The key path, on the line of tokens_file in the config (6).
			problemAt(t, err, "api.tokens_file", c.msg, 6)
			file := filepath.Join(filepath.Dir(path), "tokens.yaml")
			if c.line > 0 {
				file += ":" + strconv.Itoa(c.line) + ":"
			}
			if c.name != "a directory" && c.name != "both forms" && !strings.Contains(err.Error(), file) {
				t.Errorf("the problem does not name %s: %v", file, err)
			}
			if strings.Contains(err.Error(), secret) || c.tokens != nil && strings.Contains(err.Error(), h1) {
				t.Errorf("the problem quotes the file: %v", err)
			}
		})
	}

	// Reads behind tokens need operators to read with.
	_, err := Parse([]byte(minimal+"api: {auth_reads: true}\n"), "t.yaml", testEnv)
	problemAt(t, err, "api.auth_reads", "true needs operators to read with", 5)
}
