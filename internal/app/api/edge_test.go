package api

import (
	"github.com/lib/pq"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/enginehealth/enginehealth/health"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/leader"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/enginehealth/enginehealth/recovery"
)

// pgText is what PostgreSQL answers to a NUL byte or invalid UTF-8 in a
// text parameter: the text that must never reach a client.
const pgText = `pq: invalid byte sequence for encoding "UTF8": 0x00`

// store is the API's seams (node reader, acker, events, master ops) over
// a map: it records every call and, like PostgreSQL, fails on text that
// is not valid UTF-8 or holds a NUL byte.
type store struct {
	mu    sync.Mutex
	calls []string
	slow  func() // runs inside Check and List, when set
	// held: what Parked lists (of any state) until a hold decision
	// decides them.
	held []recovery.WaitingRetry
}

func (s *store) call(op string, text ...string) error {
	s.mu.Lock()
	s.calls = append(s.calls, op+" "+strings.Join(text, "|"))
	s.mu.Unlock()
	for _, t := range text {
		if !utf8.ValidString(t) || strings.ContainsRune(t, 0) {
			return errors.New(pgText)
		}
		if t == "db-down" {
			return errors.New("pq: the database system is shutting down (password=hunter2)")
		}
		if t == "db-slow" {
			return fmt.Errorf("retry stats: %w", &pq.Error{Code: "57014", Message: "canceling statement due to user request"})
		}
		if t == "db-standby" {
			return fmt.Errorf("get node: %w: server is in hot standby mode (password=hunter2)", pgdb.ErrReadOnly)
		}
		if t == "not-trusted" {
			return fmt.Errorf("pause: %w: term 4, keep-alive unanswered", leader.ErrNotTrusted)
		}
	}
	return nil
}

func (s *store) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func (s *store) List(context.Context) ([]nodes.Node, error) {
	if s.slow != nil {
		s.slow()
	}
	return []nodes.Node{}, s.call("list")
}

func (s *store) Get(_ context.Context, name string) (nodes.Node, error) {
	if err := s.call("get", name); err != nil {
		return nodes.Node{}, err
	}
	if name == "missing" {
		return nodes.Node{}, nodes.ErrNotFound
	}
	return nodes.Node{Name: name}, nil
}

func (s *store) Ack(_ context.Context, name string, by audit.By, reason string) (nodes.Node, error) {
	if err := s.call("ack", name, by.Actor, by.Via, reason); err != nil {
		return nodes.Node{}, err
	}
	return nodes.Node{Name: name, StatusReason: reason}, nil
}

func (s *store) ResetGrade(_ context.Context, name string, by audit.By, reason string) (nodes.GradeChange, error) {
	if err := s.call("reset-grade", name, by.Actor, by.Via, reason); err != nil {
		return nodes.GradeChange{}, err
	}
	return nodes.GradeChange{Name: name, From: nodes.GradeError, To: nodes.GradeNormal, Reason: reason}, nil
}

func (s *store) Events(_ context.Context, p audit.ListParams) ([]audit.Event, error) {
	return nil, s.call("events", p.Node)
}

func (s *store) Check(_ context.Context, req health.CheckRequest) (health.CheckResult, error) {
	if s.slow != nil {
		s.slow()
	}
	return health.CheckResult{RunID: 1, Forced: req.Force}, s.call("check", req.Reason)
}

func (s *store) Pause(_ context.Context, by audit.By, reason string) (health.Pause, error) {
	return health.Pause{Paused: true, Actor: by.Actor, Reason: reason}, s.call("pause", reason)
}

func (s *store) Resume(_ context.Context, by audit.By, reason string) (health.Pause, error) {
	return health.Pause{Actor: by.Actor, Reason: reason}, s.call("resume", reason)
}

func (s *store) HoldsOpen(context.Context) (int64, time.Duration, error) {
	return 0, 0, s.call("holds open")
}

func (s *store) Run(_ context.Context, id int64) (recovery.RunDetail, error) {
	if id == 404 {
		return recovery.RunDetail{}, recovery.ErrNoRun
	}
	return recovery.RunDetail{RunRow: recovery.RunRow{ID: id}}, s.call("run")
}

func (s *store) PauseState(context.Context) (health.Pause, error) {
	return health.Pause{}, s.call("pause state")
}

func (s *store) Recover(_ context.Context, sc recovery.Scope) (recovery.Result, error) {
	return recovery.Result{RunID: 2}, s.call("recover", sc.Workflows...)
}

func (s *store) Plan(_ context.Context, sc recovery.Scope) ([]recovery.WorkflowPlan, error) {
	return nil, s.call("plan", sc.Workflows...)
}

func (s *store) Runs(context.Context, int) ([]recovery.RunRow, error) {
	return nil, s.call("runs")
}

func (s *store) ActedRuns(ctx context.Context, n int) ([]recovery.RunRow, error) {
	return s.Runs(ctx, n)
}

func (s *store) Holds(_ context.Context, wf string, _ int) ([]recovery.Hold, error) {
	return nil, s.call("holds", wf)
}

func (s *store) Waiting(_ context.Context, wf string, _ int) ([]recovery.WaitingRetry, error) {
	return nil, s.call("waiting", wf)
}

func (s *store) DecideHolds(_ context.Context, d recovery.HoldDecision) (recovery.HoldResult, error) {
	s.mu.Lock()
	n := len(s.held)
	s.held = nil
	s.mu.Unlock()
	return recovery.HoldResult{Action: d.Action, Decided: int64(n)}, s.call("holds "+d.Action, d.By.Actor, d.By.Via, d.Workflow, d.Reason)
}

func (s *store) Workflows() []string { return []string{"orders"} }

func (s *store) Violations(context.Context, time.Time, int) ([]recovery.ViolationCount, []recovery.Violation, error) {
	return nil, nil, s.call("violations")
}

func (s *store) Parked(_ context.Context, f recovery.ParkedFilter) ([]recovery.WaitingRetry, int64, error) {
	s.mu.Lock()
	held := slices.Clone(s.held)
	s.mu.Unlock()
	return held, int64(len(held)), s.call("parked "+f.State, f.Workflow, f.Task, f.Node, string(f.Cause), f.OlderThan.String())
}

func (s *store) Instance(_ context.Context, ref recovery.Ref, _ recovery.InstanceParams) (recovery.InstanceView, error) {
	return recovery.InstanceView{}, s.call("instance", ref.Workflow, ref.Instance)
}

func (s *store) RetryStats(context.Context) ([]recovery.RetryStats, error) {
	return nil, s.call("retry stats")
}

func (s *store) Retry(_ context.Context, m recovery.ManualRetry) (recovery.RetryResult, error) {
	return recovery.RetryResult{}, s.call("retry", m.Workflow, m.Instance, m.Task, m.Reason)
}

func newTestHandler(t *testing.T) (http.Handler, *store, *testkit.Buffer) {
	t.Helper()
	s := &store{}
	logs := &testkit.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := NewHandler(Config{Self: "me", Nodes: s, Acker: s, Auth: tokenAuth("tok"), Ops: s, Events: s.Events, Log: log})
	return h, s, logs
}

// TestHostileInput: every bad request is refused at the edge, naming the
// parameter at fault, before any database call; the answer carries a
// request id and never PostgreSQL's text.
func TestHostileInput(t *testing.T) {
	h, s, logs := newTestHandler(t)
	const json = "application/json"
	cases := []struct {
		name, method, target, ctype, body string
		code                              int
		want                              string // in the error text
	}{
		{"NUL in node name", "GET", "/v1/nodes/%00x", "", "", 400, "path parameter name"},
		{"invalid UTF-8 in node name", "GET", "/v1/nodes/%ff", "", "", 400, "path parameter name"},
		{"escape sequence in node name", "GET", "/v1/nodes/%1b%5B2J", "", "", 400, "path parameter name"},
		{"slash in node name", "GET", "/v1/nodes/a%2Fb", "", "", 400, "path: an encoded slash"},
		{"node name too long", "GET", "/v1/nodes/" + strings.Repeat("x", 64), "", "", 400, "path parameter name"},
		{"node name starting with a dot", "GET", "/v1/nodes/.x", "", "", 400, "path parameter name"},
		{"invalid UTF-8 in ?node=", "GET", "/v1/events?node=%ff", "", "", 400, "query parameter node"},
		{"NUL in ?node=", "GET", "/v1/events?node=%00", "", "", 400, "query parameter node"},
		{"misspelt parameter", "GET", "/v1/events?Limit=5", "", "", 400, `query parameter "Limit": unknown`},
		{"unknown parameter", "GET", "/v1/nodes?foo=bar", "", "", 400, `query parameter "foo": unknown`},
		{"parameter of a mutation", "POST", "/v1/pause?force=1", json, `{"reason":"x"}`, 400, `query parameter "force": unknown`},
		{"unknown event kind", "GET", "/v1/events?kind=nosuchkind", "", "", 400, "query parameter kind: not an event kind"},
		{"two kinds in one", "GET", "/v1/events?kind=paused,resumed", "", "", 400, "query parameter kind"},
		{"limit 0", "GET", "/v1/events?limit=0", "", "", 400, "query parameter limit: not an integer from 1 to 10000"},
		{"runs limit 0", "GET", "/v1/runs?limit=0", "", "", 400, "query parameter limit"},
		{"newline in ?node=", "GET", "/v1/events?node=a%0Ab", "", "", 400, "query parameter node"},
		{"limit above the cap", "GET", "/v1/events?limit=10001", "", "", 400, "query parameter limit"},
		{"negative after", "GET", "/v1/events?after=-1", "", "", 400, "query parameter after"},
		{"after not a number", "GET", "/v1/events?after=1e3", "", "", 400, "query parameter after"},
		{"limit not a number", "GET", "/v1/runs?limit=%00", "", "", 400, "query parameter limit"},
		{"NUL in ack path", "POST", "/v1/nodes/%00x/ack", json, `{"reason":"x"}`, 400, "path parameter name"},
		{"NUL in reason", "POST", "/v1/nodes/n/ack", json, `{"reason":"a\u0000b"}`, 400, "body.reason"},
		{"NUL in reset-grade path", "POST", "/v1/nodes/%00x/reset-grade", json, `{"reason":"x"}`, 400, "path parameter name"},
		{"escape sequence in reset-grade reason", "POST", "/v1/nodes/n/reset-grade", json, `{"reason":"\u001b[2J"}`, 400, "body.reason"},
		{"unknown field in reset-grade", "POST", "/v1/nodes/n/reset-grade", json, `{"grade":"NORMAL"}`, 400, `body: unknown field "grade"`},
		{"escape sequence and newline in reason", "POST", "/v1/nodes/n/ack", json, `{"reason":"\u001b[2J\nowned"}`, 400, "body.reason"},
		{"bidi override in reason", "POST", "/v1/nodes/n/ack", json, `{"reason":"a\u202eb"}`, 400, "body.reason"},
		{"reason too long", "POST", "/v1/nodes/n/ack", json, `{"reason":"` + strings.Repeat("a", 1001) + `"}`, 400, "body.reason"},
		{"reason not a string", "POST", "/v1/nodes/n/ack", json, `{"reason":5}`, 400, "body.reason: want a string"},
		{"invalid UTF-8 in body", "POST", "/v1/nodes/n/ack", json, "{\"reason\":\"\xff\"}", 400, "body: not valid UTF-8"},
		{"body too large", "POST", "/v1/nodes/n/ack", json, `{"reason":"` + strings.Repeat("a", 70<<10) + `"}`, 413, "body: larger than 65536 bytes"},
		{"unknown field", "POST", "/v1/nodes/n/ack", json, `{"reason":"x","force":true}`, 400, `body: unknown field "force"`},
		{"second JSON value", "POST", "/v1/nodes/n/ack", json, `{"reason":"x"}{"reason":"y"}`, 400, "body: unexpected data after the JSON value"},
		{"trailing garbage", "POST", "/v1/nodes/n/ack", json, `{"reason":"x"} x`, 400, "body: unexpected data after the JSON value"},
		{"not an object", "POST", "/v1/nodes/n/ack", json, `["x"]`, 400, "body: want an object"},
		{"not JSON", "POST", "/v1/nodes/n/ack", json, `{reason`, 400, "body: not valid JSON"},
		{"form body", "POST", "/v1/nodes/n/ack", "application/x-www-form-urlencoded", `reason=x`, 415, "Content-Type application/json"},
		{"check: unknown field", "POST", "/v1/check", json, `{"x":1}`, 400, `body: unknown field "x"`},
		{"check: trailing data", "POST", "/v1/check", json, `{} {}`, 400, "body: unexpected data after the JSON value"},
		{"check: force without reason", "POST", "/v1/check", json, `{"force":true}`, 400, "body.reason: required with force"},
		{"check: force with blank reason", "POST", "/v1/check", json, `{"force":true,"reason":"  "}`, 400, "body.reason: required with force"},
		{"check: force not a bool", "POST", "/v1/check", json, `{"force":"yes","reason":"x"}`, 400, "body.force: want true or false"},
		{"check: escape in reason", "POST", "/v1/check", json, `{"force":true,"reason":"\u001b[2J"}`, 400, "body.reason"},
		{"pause: no reason", "POST", "/v1/pause", json, `{}`, 400, "body.reason: required"},
		{"pause: empty body", "POST", "/v1/pause", json, ``, 400, "body.reason: required"},
		{"pause: NUL in reason", "POST", "/v1/pause", json, `{"reason":"a\u0000"}`, 400, "body.reason"},
		{"pause: unknown field", "POST", "/v1/pause", json, `{"reason":"x","until":"1h"}`, 400, `body: unknown field "until"`},
		{"resume: newline in reason", "POST", "/v1/resume", json, `{"reason":"a\nb"}`, 400, "body.reason"},
		{"recovery: workflows not an array", "POST", "/v1/recovery", json, `{"workflows":"a"}`, 400, "body.workflows: want an array"},
		{"recovery: dry_run not a bool", "POST", "/v1/recovery", json, `{"dry_run":1}`, 400, "body.dry_run: want true or false"},
		{"recovery: unknown field", "POST", "/v1/recovery", json, `{"dry_run":true,"force":1}`, 400, `body: unknown field "force"`},
		{"recovery: trailing data", "POST", "/v1/recovery", json, `{"dry_run":true}]`, 400, "body: unexpected data after the JSON value"},
		{"holds: NUL in ?workflow=", "GET", "/v1/holds?workflow=a%00", "", "", 400, "query parameter workflow"},
		{"holds: empty ?workflow=", "GET", "/v1/holds?workflow=", "", "", 400, "query parameter workflow: empty"},
		{"holds: limit above the cap", "GET", "/v1/holds?limit=99999", "", "", 400, "query parameter limit"},
		{"holds retry: neither instances nor all", "POST", "/v1/holds/retry", json, `{"reason":"x"}`, 400, "body: give instances"},
		{"holds retry: both", "POST", "/v1/holds/retry", json, `{"all":true,"instances":[{"workflow":"w","instance":"1"}]}`, 400, "not both"},
		{"holds retry: empty instance", "POST", "/v1/holds/retry", json, `{"instances":[{"workflow":"w","instance":""}]}`, 400, "body.instances[0].instance: empty"},
		{"holds retry: unknown field in an instance", "POST", "/v1/holds/retry", json, `{"instances":[{"workflow":"w","id":"1"}]}`, 400, `unknown field "id"`},
		// Inside an instance as at the top: encoding/json takes the
		// last of two keys, "INSTANCE" for "instance", and decided 106.
		{"holds retry: an instance's key in another case", "POST", "/v1/holds/retry", json, `{"instances":[{"workflow":"w","instance":"105","INSTANCE":"106"}],"reason":"x"}`, 400, `body.instances[0]: unknown field "INSTANCE"`},
		{"holds fail: an instance's key twice", "POST", "/v1/holds/fail", json, `{"instances":[{"workflow":"w","instance":"107","instance":"108"}],"reason":"x"}`, 400, `body.instances[0]: field "instance" given more than once`},
		{"holds retry: a null instance id", "POST", "/v1/holds/retry", json, `{"instances":[{"workflow":"w","instance":null}]}`, 400, `body.instances[0]: field "instance" is null`},
		{"holds retry: a null instance", "POST", "/v1/holds/retry", json, `{"instances":[null]}`, 400, `body.instances[0]: null`},
		{"recovery: a null workflow in the list", "POST", "/v1/recovery", json, `{"workflows":[null]}`, 400, `body.workflows[0]: null`},
		{"holds fail: escape in workflow", "POST", "/v1/holds/fail", json, `{"all":true,"workflow":"\u001b[2J"}`, 400, "body.workflow"},
		{"holds fail: workflow without all", "POST", "/v1/holds/fail", json, `{"workflow":"w","instances":[{"workflow":"w","instance":"1"}]}`, 400, "only with all"},
		{"holds fail: empty workflow is not every workflow", "POST", "/v1/holds/fail", json, `{"all":true,"workflow":"","reason":"x"}`, 400, "body.workflow: empty"},
		{"holds retry: null workflow", "POST", "/v1/holds/retry", json, `{"all":true,"workflow":null}`, 400, `body: field "workflow" is null`},
		{"recovery: a null dry_run is not a run", "POST", "/v1/recovery", json, `{"dry_run":null}`, 400, `body: field "dry_run" is null`},
		{"check: null force", "POST", "/v1/check", json, `{"force":null}`, 400, `body: field "force" is null`},
		{"recovery: null workflows with a null dry_run", "POST", "/v1/recovery", json, `{"workflows":null,"dry_run":null}`, 400, `body: field "dry_run" is null`},
		{"holds fail: instances not an array", "POST", "/v1/holds/fail", json, `{"instances":"w/1"}`, 400, "body.instances: want an array"},
		{"instance: NUL in id", "GET", "/v1/instances/orders/a%00b", "", "", 400, "path parameter id"},
		{"instance: escape in workflow", "GET", "/v1/instances/%1b%5B2J/1", "", "", 400, "path parameter workflow"},
		{"instance: id too long", "GET", "/v1/instances/orders/" + strings.Repeat("9", 201), "", "", 400, "path parameter id"},
		{"instance: limit not a number", "GET", "/v1/instances/orders/1?limit=x", "", "", 400, "query parameter limit"},
		{"instance: trailing slash", "GET", "/v1/instances/orders/x/", "", "", 400, "path parameter id: ends with a slash"},
		{"instance by query: no id", "GET", "/v1/instances?workflow=orders", "", "", 400, "query parameter id: missing"},
		{"instance by query: no workflow", "GET", "/v1/instances?id=1", "", "", 400, "query parameter workflow: missing"},
		{"instance by query: empty id", "GET", "/v1/instances?workflow=orders&id=", "", "", 400, "query parameter id: empty"},
		{"instance by query: NUL in id", "GET", "/v1/instances?workflow=orders&id=a%00b", "", "", 400, "query parameter id"},
		{"instance by query: id too long", "GET", "/v1/instances?workflow=orders&id=" + strings.Repeat("9", 201), "", "", 400, "query parameter id"},
		{"instance by query: id twice", "GET", "/v1/instances?workflow=orders&id=1&id=2", "", "", 400, `query parameter "id": given more than once`},
		{"instance by query: unknown parameter", "GET", "/v1/instances?workflow=orders&instance=1", "", "", 400, `query parameter "instance": unknown`},
		{"retry: no instance", "POST", "/v1/retry", json, `{"workflow":"w"}`, 400, "body.instance: empty"},
		{"retry: NUL in instance", "POST", "/v1/retry", json, `{"workflow":"w","instance":"1\u0000"}`, 400, "body.instance"},
		{"retry: instance too long", "POST", "/v1/retry", json, `{"workflow":"w","instance":"` + strings.Repeat("1", 201) + `"}`, 400, "body.instance"},
		{"retry: newline in reason", "POST", "/v1/retry", json, `{"workflow":"w","instance":"1","reason":"a\nb"}`, 400, "body.reason"},
		{"run: not a number", "GET", "/v1/runs/x", "", "", 400, "path parameter id: not a positive integer"},
		{"run: zero", "GET", "/v1/runs/0", "", "", 400, "path parameter id"},
		{"run: overflow", "GET", "/v1/runs/99999999999999999999", "", "", 400, "path parameter id"},
		{"events: bad since", "GET", "/v1/events?since=yesterday", "", "", 400, "query parameter since: want an RFC 3339 time"},
		{"events: until before since", "GET", "/v1/events?since=2026-11-23T10:00:00Z&until=2026-11-23T09:00:00Z", "", "", 400, "until must be after since"},
		{"events: NUL in kind", "GET", "/v1/events?kind=a%00", "", "", 400, "query parameter kind"},
		{"events: escape in workflow", "GET", "/v1/events?workflow=%1b%5B2J", "", "", 400, "query parameter workflow"},
		{"events: empty instance", "GET", "/v1/events?instance=", "", "", 400, "query parameter instance: empty"},
		{"events: negative run", "GET", "/v1/events?run=-1", "", "", 400, "query parameter run"},
		{"events: run 0", "GET", "/v1/events?run=0", "", "", 400, "query parameter run: not a positive integer"},
		{"events: since equals until at year 1", "GET", "/v1/events?since=0001-01-01T00:00:00Z&until=0001-01-01T00:00:00Z", "", "", 400, "until must be after since"},
		{"run: plus sign", "GET", "/v1/runs/+134", "", "", 400, "path parameter id"},
		{"run: leading zero", "GET", "/v1/runs/0134", "", "", 400, "path parameter id"},
		{"trailing slash: canonical, no such route", "GET", "/v1/nodes/", "", "", 404, "no such endpoint"},
		{"dot-dot segment", "GET", "/v1/nodes/..", "", "", 400, "path: not in canonical form"},
		{"encoded slash between workflow and id", "GET", "/v1/instances/orders%2F1", "", "", 400, "path: an encoded slash"},
		{"instance without an id: no redirect", "GET", "/v1/instances/orders", "", "", 404, "no such endpoint"},
		{"instance without an id, POST", "POST", "/v1/instances/orders", "", "", 404, "no such endpoint"},
		{"encoded slash, lower case", "GET", "/v1/nodes%2fn1", "", "", 400, "path: an encoded slash"},
		{"empty segment", "GET", "//v1/nodes", "", "", 400, "path: not in canonical form"},
		{"dot segment", "GET", "/v1/./nodes", "", "", 400, "path: not in canonical form"},
		{"empty segment inside", "GET", "/v1//leader", "", "", 400, "path: not in canonical form"},
		{"dot-dot back to the same node", "GET", "/v1/nodes/n1/../n1", "", "", 400, "path: not in canonical form"},
		{"repeated query parameter", "GET", "/v1/events?node=n1&node=n2", "", "", 400, `query parameter "node": given more than once`},
		{"malformed query", "GET", "/v1/events?node=%zz", "", "", 400, "query: malformed"},
		{"empty limit", "GET", "/v1/events?limit=", "", "", 400, "query parameter limit"},
		{"empty node", "GET", "/v1/events?node=", "", "", 400, "query parameter node"},
		{"field in another case", "POST", "/v1/nodes/n/ack", json, `{"REASON":"x"}`, 400, `body: unknown field "REASON"`},
		{"field given twice", "POST", "/v1/nodes/n/ack", json, `{"reason":"\u001b[2J","reason":"ok"}`, 400, `body: field "reason" given more than once`},
		{"null body", "POST", "/v1/nodes/n/ack", json, `null`, 400, "body: want an object, got null"},
		{"right-to-left mark in reason", "POST", "/v1/nodes/n/ack", json, `{"reason":"a\u200fb"}`, 400, "body.reason"},
		{"line separator in reason", "POST", "/v1/nodes/n/ack", json, `{"reason":"a\u2028b"}`, 400, "body.reason"},
		{"zero-width space in reason", "POST", "/v1/nodes/n/ack", json, `{"reason":"a\u200bb"}`, 400, "body.reason"},
		{"byte order mark in reason", "POST", "/v1/nodes/n/ack", json, `{"reason":"\ufeffok"}`, 400, "body.reason"},
		{"tag character in reason", "POST", "/v1/nodes/n/ack", json, `{"reason":"a\udb40\udc01"}`, 400, "body.reason"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := s.count()
			rec := do(h, c.method, c.target, c.ctype, c.body)
			eb := errorBody(t, rec)
			if rec.Code != c.code || !strings.Contains(eb.Error, c.want) {
				t.Fatalf("%s %s: %d %q, want %d and error text with %q", c.method, c.target, rec.Code, eb.Error, c.code, c.want)
			}
			if s.count() != before {
				t.Fatalf("a refused request reached the store: %v", s.calls[before:])
			}
			for _, bad := range []string{"pq:", "invalid byte sequence", "\x1b", "\x00"} {
				if strings.Contains(rec.Body.String(), bad) {
					t.Fatalf("answer carries %q: %s", bad, rec.Body)
				}
			}
		})
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Fatalf("refused requests logged errors:\n%s", logs)
	}

	// Valid requests still pass.
	for _, c := range []struct{ method, target, body string }{
		{"GET", "/v1/nodes/node-a", ""},
		{"GET", "/v1/events?node=node-a.example_1&limit=10000", ""},
		{"GET", "/v1/events?after=9223372036854775807", ""}, // ids are not capped like limit
		{"GET", "/v1/events?workflow=orders&instance=1042&kind=instance_repaired&since=2026-11-23T10:00:00Z&until=2026-11-23T11:00:00.5%2B01:00&run=7", ""},
		{"GET", "/v1/runs/7", ""},
		{"POST", "/v1/nodes/n/ack", `{"reason":"checked the host, disk replaced: ok ✓"}`},
		{"POST", "/v1/nodes/n/ack", "{\"reason\":\"دیسک\u200cها عوض شد 👩\u200d🔧\"}"}, // zero-width (non-)joiners are text
		{"POST", "/v1/nodes/n/ack", ""},
		{"POST", "/v1/check", `{}`},
		{"POST", "/v1/check", `{"force":true,"reason":"rack 3 is gone"}`},
		{"POST", "/v1/pause", `{"reason":"schema migration"}`},
		{"POST", "/v1/resume", ``},
		{"POST", "/v1/recovery", ` {"workflows":["orders"],"dry_run":true} ` + "\n"},
	} {
		if rec := do(h, c.method, c.target, json, c.body); rec.Code != http.StatusOK {
			t.Errorf("%s %s %s: %d %s", c.method, c.target, c.body, rec.Code, rec.Body)
		}
	}
}

func do(h http.Handler, method, target, ctype, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if method == "POST" {
		req.Header.Set("Authorization", "Bearer tok")
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// errorBody decodes an error answer and checks its request id.
func errorBody(t *testing.T, rec *httptest.ResponseRecorder) apitype.ErrorBody {
	t.Helper()
	var eb apitype.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil {
		t.Fatalf("answer %d is not an ErrorBody: %v: %s", rec.Code, err, rec.Body)
	}
	if id := rec.Header().Get("X-Request-Id"); eb.RequestID == "" || eb.RequestID != id {
		t.Fatalf("request id %q in the body, %q in the header", eb.RequestID, id)
	}
	return eb
}

// TestInternalErrorHidesCause: a database failure is logged at ERROR with
// the request id and the real error; the client gets a generic 503 with
// the same request id.
func TestInternalErrorHidesCause(t *testing.T) {
	h, _, logs := newTestHandler(t)
	rec := do(h, "GET", "/v1/nodes/db-down", "", "")
	eb := errorBody(t, rec)
	if rec.Code != http.StatusServiceUnavailable || eb.Error != "internal error" {
		t.Fatalf("%d %+v", rec.Code, eb)
	}
	if strings.Contains(rec.Body.String(), "pq:") || strings.Contains(rec.Body.String(), "hunter2") {
		t.Fatalf("the database's text reached the client: %s", rec.Body)
	}
	var line struct {
		Level     string `json:"level"`
		RequestID string `json:"request_id"`
		Err       string `json:"err"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(logs.String())), &line); err != nil {
		t.Fatalf("log %q: %v", logs, err)
	}
	if line.Level != "ERROR" || line.RequestID != eb.RequestID || !strings.Contains(line.Err, "shutting down") {
		t.Fatalf("log line %+v, want ERROR with request id %s and the cause", line, eb.RequestID)
	}
}

// TestDatabaseUnavailableIsNotAFault: a database that cannot be used for
// a while (here a standby the address moved to before its promotion) is
// answered 503 "database unavailable", with what kind and Retry-After,
// and logged as a warning, not as an error of the daemon.
func TestDatabaseUnavailableIsNotAFault(t *testing.T) {
	h, _, logs := newTestHandler(t)
	rec := do(h, "GET", "/v1/nodes/db-standby", "", "")
	eb := errorBody(t, rec)
	if rec.Code != http.StatusServiceUnavailable || !strings.HasPrefix(eb.Error, "database unavailable (the server takes no writes") ||
		rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("%d %+v Retry-After %q", rec.Code, eb, rec.Header().Get("Retry-After"))
	}
	if strings.Contains(rec.Body.String(), "hunter2") || strings.Contains(rec.Body.String(), "hot standby") {
		t.Fatalf("the database's text reached the client: %s", rec.Body)
	}
	var line struct {
		Level     string `json:"level"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(logs.String())), &line); err != nil {
		t.Fatalf("log %q: %v", logs, err)
	}
	if line.Level != "WARN" || line.RequestID != eb.RequestID {
		t.Fatalf("log line %+v, want WARN with request id %s", line, eb.RequestID)
	}
}

// TestSlowStatementIsATimeout: a statement the database cancelled (the
// request's time ran out: lib/pq cancels it and returns the server's
// 57014, not the context's error) is answered 503 "timed out", with
// Retry-After, not "internal error" (a 200k-case retry statistics read
// was, in an outside review).
func TestSlowStatementIsATimeout(t *testing.T) {
	h, _, _ := newTestHandler(t)
	rec := do(h, "GET", "/v1/nodes/db-slow", "", "")
	eb := errorBody(t, rec)
	if rec.Code != http.StatusServiceUnavailable || eb.Error != "timed out" || rec.Header().Get("Retry-After") == "" ||
		!strings.Contains(eb.Detail, "did not finish") {
		t.Fatalf("%d %+v Retry-After %q, want 503 timed out", rec.Code, eb, rec.Header().Get("Retry-After"))
	}
}

func TestRequestID(t *testing.T) {
	h, _, _ := newTestHandler(t)
	for _, c := range []struct {
		in   string
		keep bool
	}{
		{"", false},
		{"abc-123_X.y", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"a b", false},
		{"a\x1b", false},
		{"ü", false},
	} {
		req := httptest.NewRequest("GET", "/v1/nodes/missing", nil)
		if c.in != "" {
			req.Header.Set("X-Request-Id", c.in)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		eb := errorBody(t, rec)
		if rec.Code != http.StatusNotFound || (eb.RequestID == c.in) != c.keep || !validRequestID(eb.RequestID) {
			t.Errorf("incoming %q: %d, request id %q (keep %v)", c.in, rec.Code, eb.RequestID, c.keep)
		}
	}
	// Successful answers carry it too.
	rec := do(h, "GET", "/v1/nodes", "", "")
	if rec.Code != http.StatusOK || !validRequestID(rec.Header().Get("X-Request-Id")) {
		t.Fatalf("%d, request id %q", rec.Code, rec.Header().Get("X-Request-Id"))
	}
}

func TestTerminalSafe(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode ✓ and a back\\slash": "plain text, ünïcode ✓ and a back\\slash",
		"\x1b[2J\nowned":     `\x1b[2J\nowned`,
		"tab\there":          `tab\there`,
		"nul\x00":            `nul\x00`,
		"bad \xff\xfe utf8":  `bad \xff\xfe utf8`,
		"c1 \u009b31m":       `c1 \u009b31m`,
		"bidi \u202egnp.exe": `bidi \u202egnp.exe`,
		"del\x7f":            `del\x7f`,
		"rlm \u200fx":        `rlm \u200fx`,
		"zwsp \u200bx":       `zwsp \u200bx`,
		"ls \u2028x":         `ls \u2028x`,
		"bom \ufeffx":        `bom \ufeffx`,
		"tag \U000e0001x":    `tag \U000e0001x`,
		"zwj 👩\u200d🔧":       "zwj 👩\u200d🔧",
	} {
		if got := TerminalSafe(in); got != want {
			t.Errorf("TerminalSafe(%q) = %q, want %q", in, got, want)
		}
		if got := TerminalSafe(TerminalSafe(in)); got != TerminalSafe(in) {
			t.Errorf("TerminalSafe is not idempotent on %q: %q", in, got)
		}
	}
}

// TestClientShowsRequestID: the client's error carries the daemon's
// error, detail and request id, escaped for the terminal.
func TestClientShowsRequestID(t *testing.T) {
	h, _, _ := newTestHandler(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	_, err := NewClient(srv.URL, "").Node(context.Background(), "\x1b[2J")
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 400 || se.RequestID == "" {
		t.Fatalf("%v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "path parameter name") || !strings.Contains(msg, "request id "+se.RequestID) || strings.ContainsRune(msg, 0x1b) {
		t.Fatalf("error text %q", msg)
	}
	// A daemon's text with control characters is escaped when shown.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, `{"error":"\u001b]0;owned\u0007","request_id":"x\ny"}`)
	}))
	defer evil.Close()
	_, err = NewClient(evil.URL, "").Nodes(context.Background())
	if msg := err.Error(); strings.ContainsAny(msg, "\x1b\x07\n") || !strings.Contains(msg, `\x1b]0;owned\a`) {
		t.Fatalf("error text %q", msg)
	}
}

// notMaster is the store of a node that is not the master.
type notMaster struct{ *store }

func (notMaster) Pause(context.Context, audit.By, string) (health.Pause, error) {
	return health.Pause{}, health.ErrNotMaster
}

func (notMaster) DecideHolds(context.Context, recovery.HoldDecision) (recovery.HoldResult, error) {
	return recovery.HoldResult{}, health.ErrNotMaster
}

// TestRefusalIsMarked: a mutation no master can take is a 503 marked as
// a refusal (the CLI exits 4: try later); a database failure is a 503
// without the mark (exit 1).
func TestRefusalIsMarked(t *testing.T) {
	s := &store{}
	h := NewHandler(Config{Self: "me", Nodes: s, Acker: s, Auth: tokenAuth("tok"), Ops: notMaster{s}, Events: s.Events,
		Local: func() (apitype.Leader, error) { return apitype.Leader{}, errors.New("not in office") },
		Log:   slog.New(slog.NewTextHandler(io.Discard, nil))})
	rec := do(h, "POST", "/v1/pause", "application/json", `{"reason":"x"}`)
	if rec.Code != 503 || rec.Header().Get(RefusedHeader) != "no-master" || !strings.Contains(rec.Body.String(), "no acting master") {
		t.Fatalf("pause on a lone non-master: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	rec = do(h, "POST", "/v1/resume", "application/json", `{"reason":"db-down"}`)
	if rec.Code != 503 || rec.Header().Get(RefusedHeader) != "" {
		t.Fatalf("resume with the database down: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	// The master itself, its office not trusted now (a frozen etcd, a
	// partition): a refusal to retry, not an internal error (second
	// outside review).
	h = NewHandler(Config{Self: "me", Nodes: s, Acker: s, Auth: tokenAuth("tok"), Ops: s, Events: s.Events,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rec = do(h, "POST", "/v1/pause", "application/json", `{"reason":"not-trusted"}`)
	if rec.Code != 503 || rec.Header().Get(RefusedHeader) != "no-master" || !strings.Contains(rec.Body.String(), "office cannot act now") {
		t.Fatalf("pause on a master whose office is not trusted: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}
