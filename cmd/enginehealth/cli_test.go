package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// evil is stored text that would clear the operator's screen, retitle
// the terminal and forge a table row if printed as is.
const evil = "\x1b[2J\x1b]0;pwned\x07\nforged row\tcol\u202e"

// fakeDaemon answers the read-only routes with records full of evil.
func fakeDaemon(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	answer := func(v any) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v)
		}
	}
	e := evil
	mux.HandleFunc("GET /v1/events", answer([]apitype.Event{{ID: 1, At: time.Now(), Kind: audit.KindNodeAck, Actor: e,
		Node: &e, FromState: &e, ToState: &e, Reason: e}}))
	mux.HandleFunc("GET /v1/nodes", answer([]apitype.Node{{Name: e, Status: nodes.Status(e), Version: e, APIAddress: e, FailoverGrade: e, StatusReason: e}}))
	mux.HandleFunc("GET /v1/runs", answer([]apitype.Run{{ID: 1, Kind: recovery.RunKind(e), Trigger: recovery.Trigger(e), Master: e, Status: e, Error: e}}))
	one := 1
	mux.HandleFunc("GET /v1/instances", answer(apitype.InstanceView{Workflow: e, Instance: e, State: &e,
		Claim:    &apitype.Claim{Node: e, Token: e},
		Attempts: []apitype.Attempt{{Task: e, State: e, Cause: recovery.Cause(e), Nodes: []string{e}, LastReason: e, LastNode: &e}},
		Events:   []apitype.Event{{ID: 1, Kind: audit.Kind(e), Actor: e, Node: &e, FromState: &e, ToState: &e, Attempt: &one, Reason: e}}}))
	mux.HandleFunc("GET /v1/holds", answer([]apitype.Hold{{Workflow: e, Instance: e, Task: e, State: e, LastNode: &e, LastError: &e}}))
	mux.HandleFunc("GET /v1/nodes/{name}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": evil, "detail": evil, "request_id": "r1"})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestTablesEscapeControlCharacters: stored text reaches the terminal
// with its control characters escaped, one table row per record; JSON
// output stays JSON.
func TestTablesEscapeControlCharacters(t *testing.T) {
	addr := fakeDaemon(t)
	for _, cmd := range []string{"events", "nodes", "runs", "holds"} {
		out, errOut, code := runCLI(t, cmd, "--api", addr)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", cmd, code, errOut)
		}
		if strings.ContainsAny(out, "\x1b\x07\t\u202e") {
			t.Errorf("%s printed raw control characters:\n%q", cmd, out)
		}
		if lines := strings.Count(out, "\n"); lines != 2 {
			t.Errorf("%s: %d lines, want a header and one row:\n%s", cmd, lines, out)
		}
		if !strings.Contains(out, `\x1b[2J\x1b]0;pwned\a\nforged row\tcol\u202e`) {
			t.Errorf("%s: the text is not shown escaped:\n%s", cmd, out)
		}

		out, _, code = runCLI(t, cmd, "--api", addr, "-o", "json")
		if code != 0 || strings.ContainsAny(out, "\x1b\x07") || !json.Valid([]byte(out)) {
			t.Errorf("%s -o json: exit %d:\n%q", cmd, code, out)
		}
	}

	// An instance's timeline: several lines, each escaped.
	out, errOut, code := runCLI(t, "events", "--instance", "w/1", "--api", addr)
	if code != 0 || strings.ContainsAny(out, "\x1b\x07\t\u202e") || !strings.Contains(out, `forged row\tcol`) {
		t.Errorf("events --instance: exit %d %s:\n%q", code, errOut, out)
	}

	// The daemon's error text is escaped too, and names the request.
	_, errOut, code = runCLI(t, "nodes", "x", "--api", addr)
	if code != 1 || strings.ContainsAny(errOut, "\x1b\x07\t") || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "request id r1") {
		t.Fatalf("error: exit %d: %q", code, errOut)
	}
}

func TestFlagHelp(t *testing.T) {
	out, _, _ := runCLI(t, "events", "--help")
	if !strings.Contains(out, "at most 10000") {
		t.Errorf("events --limit does not state its cap:\n%s", out)
	}
	if strings.Contains(out, "(default $ENGINEHEALTH_TOKEN)") || !strings.Contains(out, "the token itself from $ENGINEHEALTH_TOKEN") {
		t.Errorf("--token-file help:\n%s", out)
	}
}

// TestUnknownCommandIsUsage: a first word that names no command exits 2
// with a suggestion; no word at all prints the help.
func TestUnknownCommandIsUsage(t *testing.T) {
	_, errOut, code := runCLI(t, "nodez")
	if code != exitUsage || !strings.Contains(errOut, `unknown command "nodez"`) || !strings.Contains(errOut, "did you mean node or nodes?") {
		t.Fatalf("exit %d, stderr %q; want exit %d naming the command and a suggestion", code, errOut, exitUsage)
	}
	out, _, code := runCLI(t)
	if code != exitOK || !strings.Contains(out, "Available Commands") {
		t.Fatalf("no arguments: exit %d, output %q; want the help", code, out)
	}
}

// TestNewLoggerRefusesUnknownLevel: a level it cannot parse is a usage
// error, not a silent default.
func TestNewLoggerRefusesUnknownLevel(t *testing.T) {
	var buf bytes.Buffer
	if _, _, err := newLogger("json", "loud", &buf); !errors.As(err, new(usageError)) {
		t.Fatalf("level loud: %v, want a usage error", err)
	}
	log, _, err := newLogger("json", "warn", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown")
	if s := buf.String(); strings.Contains(s, "hidden") || !strings.Contains(s, "shown") {
		t.Fatalf("level warn logged %q", s)
	}
}

// TestBadTokensAreUsageErrors: a token the daemon could never take is a
// usage error naming where it came from, never the token, before any
// request; a FIFO as --token-file is refused, not waited on (outside
// review: "no daemon answered", exit 3, and a hang that ignored SIGTERM).
func TestBadTokensAreUsageErrors(t *testing.T) {
	dir := t.TempDir()
	twoLines := filepath.Join(dir, "two-lines")
	if err := os.WriteFile(twoLines, []byte("s3cr3t-token\nsecond\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"--token-file", twoLines}, "more than one line"},
		{"", []string{"--token-file", fifo}, "not a regular file (a FIFO)"},
		{"s3cr3t tok", nil, "$ENGINEHEALTH_TOKEN: the token may hold only visible ASCII characters"},
		{"s3cr3t\nsecond\n", nil, "$ENGINEHEALTH_TOKEN: the token may hold only visible ASCII"},
	}
	for _, c := range cases {
		t.Setenv("ENGINEHEALTH_TOKEN", c.env)
		args := append([]string{"pause", "--reason", "x", "--api", "127.0.0.1:1"}, c.args...)
		done := make(chan struct{})
		var out, errOut string
		var code int
		go func() {
			defer close(done)
			out, errOut, code = runCLI(t, args...)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second): // a deadline: it hung on the FIFO
			t.Fatalf("%v: still running after 30 s", c.args)
		}
		if code != exitUsage || !strings.Contains(errOut, c.want) || strings.Contains(out+errOut, "s3cr3t") {
			t.Errorf("%q %v: exit %d, want %d with %q and no token:\n%s%s", c.env, c.args, code, exitUsage, c.want, out, errOut)
		}
	}
	if _, errOut, code := runCLI(t, "status", "--api", "http://127.0.0.1:8642/v1"); code != exitUsage || !strings.Contains(errOut, "without credentials or a path") {
		t.Errorf("--api with a path: exit %d: %s", code, errOut)
	}
}

// TestConfigCheckTokensFile: config check and run refuse a bad tokens
// file with exit 2, naming api.tokens_file and the file, never what the
// file holds (here a token pasted where its hash belongs); a good one is
// summed up by role.
func TestConfigCheckTokensFile(t *testing.T) {
	t.Setenv("ENGINEHEALTH_DSN", "postgres://eh@127.0.0.1:1/eh?sslmode=disable")
	dir := t.TempDir()
	path := filepath.Join(dir, "enginehealth.yaml")
	tokens := filepath.Join(dir, "tokens.yaml")
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(path, "database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"127.0.0.1:1\", \"127.0.0.2:1\"]}\napi:\n  tokens_file: tokens.yaml\n  auth_reads: true\n")
	const pasted = "s3cr3t-pasted-token"
	write(tokens, "- {name: alice, sha256: "+pasted+", role: operate}\n")
	for _, cmd := range []string{"config check", "run"} {
		out, errOut, code := runCLI(t, append(strings.Fields(cmd), "--config", path)...)
		if code != exitUsage || !strings.Contains(errOut, "api.tokens_file: "+tokens+":1: [0].sha256: not 64 lowercase hex digits") ||
			strings.Contains(out+errOut, pasted) {
			t.Fatalf("%s with a token for a hash: exit %d, want %d naming api.tokens_file and %s, not the token:\n%s%s", cmd, code, exitUsage, tokens, out, errOut)
		}
	}
	write(tokens, "- {name: alice, sha256: "+strings.Repeat("ab", 32)+", role: operate}\n- {name: bob, sha256: "+strings.Repeat("cd", 32)+", role: read}\n")
	out, errOut, code := runCLI(t, "config", "check", "--config", path)
	if code != 0 || !strings.Contains(out, "2 operators (1 operate, 1 read), reads need a token") {
		t.Fatalf("config check of a good tokens file: exit %d:\n%s%s", code, out, errOut)
	}
}

// TestVersionJSON: `version -o json` says the version, the Go version and
// platform, and the schema version the binary migrates to (its newest
// migration), every field present (null when unknown: a test binary has
// no build date); a format it does not know is a usage error.
func TestVersionJSON(t *testing.T) {
	out, errOut, code := runCLI(t, "version", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var b map[string]any
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	ms, err := pgdb.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if b["version"] != version || b["go_version"] != runtime.Version() || b["platform"] != runtime.GOOS+"/"+runtime.GOARCH ||
		b["schema_version"] != float64(ms[len(ms)-1].Version) || len(b) != 7 {
		t.Fatalf("version -o json: %s", out)
	}
	for _, k := range []string{"commit", "commit_time", "build_date"} {
		if _, ok := b[k]; !ok {
			t.Errorf("version -o json leaves out %s", k)
		}
	}
	if _, errOut, code := runCLI(t, "version", "-o", "yaml"); code != exitUsage || !strings.Contains(errOut, `--output "yaml": want table or json`) {
		t.Fatalf("version -o yaml: exit %d: %s", code, errOut)
	}
}

// TestErrorsAreTerminalSafe: what an error quotes (a path, a server's
// message: anyone's bytes) reaches the terminal with its control and
// format characters escaped, its lines kept.
func TestErrorsAreTerminalSafe(t *testing.T) {
	_, errOut, code := runCLI(t, "config", "check", "--config", "/nonexistent/\x1b[31mred\r\u202eevil")
	if code == exitOK || strings.ContainsAny(errOut, "\x1b\r\u202e") {
		t.Fatalf("exit %d, stderr %q: want an error with its control characters escaped", code, errOut)
	}
	if !strings.Contains(errOut, `\x1b[31mred\r\u202eevil`) {
		t.Fatalf("stderr %q does not name the path, escaped", errOut)
	}
	if got := terminalLines("a\x1bb\n\tc\rd\n  - e\nenginehealth: forged\n"); got != "a\\x1bb\n\tc\\rd\n  - e\n  enginehealth: forged\n" {
		t.Fatalf("terminalLines: %q", got)
	}
	// config check's summary shows the file's text (its path, etcd's
	// prefix) escaped too.
	dir := t.TempDir()
	path := filepath.Join(dir, "v\u202e\x1b[7m.yaml")
	t.Setenv("ENGINEHEALTH_DSN", "postgres://h/db")
	if err := os.WriteFile(path, []byte("database: {dsn_env: ENGINEHEALTH_DSN}\netcd: {endpoints: [\"127.0.0.1:1\"], prefix: \"/eh\\u202e\\u200b/\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "config", "check", "--config", path)
	if code != exitOK || strings.ContainsAny(out, "\x1b\u202e\u200b") || !strings.Contains(out, `prefix /eh\u202e\u200b/`) || !strings.Contains(out, "\nnode ") {
		t.Fatalf("config check of a hostile prefix and path: exit %d, stdout %q %q", code, out, errOut)
	}
	// A line break in a path cannot start a line at the margin.
	_, errOut, _ = runCLI(t, "config", "check", "--config", "/nonexistent/x\nenginehealth: forged")
	if strings.Contains(errOut, "\nenginehealth: forged") {
		t.Fatalf("stderr %q: a path's line break started a line of its own", errOut)
	}
}
