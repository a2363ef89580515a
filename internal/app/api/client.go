package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
)

// ErrUnreachable means no daemon answered at the address, or it refused the
// connection.
var ErrUnreachable = errors.New("api: no enginehealth daemon answered")

// unreachableError is an ErrUnreachable with its own words.
type unreachableError string

func (e unreachableError) Error() string        { return string(e) }
func (e unreachableError) Is(target error) bool { return target == ErrUnreachable }

// Client calls a daemon's API.
type Client struct {
	// Addr is host:port or a base URL.
	Addr string
	// Token for mutations.
	Token string
	HTTP  *http.Client
	// DoneBy is the node that did the last mutation (NodeHeader), when the
	// daemon said.
	DoneBy string
}

// NewClient returns a client of the daemon at addr.
func NewClient(addr, token string) *Client {
	return &Client{Addr: addr, Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

func (c *Client) url(path string) string { return URL(c.Addr, path) }

// URL is the URL of path on the daemon at addr: a base URL
// (https://host:port) or host:port, which is plain HTTP.
func URL(addr, path string) string {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimSuffix(addr, "/") + path
}

// StatusError is a non-2xx answer of the daemon.
type StatusError struct {
	Code int
	// Method of the request (a 503 to a mutation is a refusal: no master
	// to do it, or the daemon is busy).
	Method string
	// Msg and Detail are the answer's error and detail, as sent.
	Msg    string
	Detail string
	// RequestID names the request in the daemon's log.
	RequestID string
	// Refused means the daemon refused rather than failed (RefusedHeader:
	// no master could take it, or busy).
	Refused bool
}

// Error is safe to print on a terminal: the daemon's text is escaped
// (TerminalSafe).
func (e *StatusError) Error() string {
	s := fmt.Sprintf("daemon answered %d: %s", e.Code, TerminalSafe(e.Msg))
	if e.Detail != "" {
		s += " (" + TerminalSafe(e.Detail) + ")"
	}
	if e.RequestID != "" {
		s += " [request id " + TerminalSafe(e.RequestID) + "]"
	}
	return s
}

func (c *Client) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	var oe *net.OpError
	switch {
	case errors.As(err, &oe) && oe.Op == "remote error":
		// The daemon answered, with a TLS alert: it refused us.
		return unreachableError(fmt.Sprintf("api: the daemon at %s refused the TLS connection (it wants a client certificate signed by a CA of its api.tls.client_ca_file, valid now: --cert): %v", c.Addr, err))
	case err != nil:
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, c.Addr, err)
	}
	defer func() { _ = resp.Body.Close() }() // closing a response body: nothing to act on
	if method != http.MethodGet {
		c.DoneBy = resp.Header.Get(NodeHeader)
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer of %s: %w", c.Addr, err)
	}
	if resp.StatusCode == http.StatusBadRequest && bytes.Contains(answer, []byte("HTTP request to an HTTPS server")) {
		return fmt.Errorf("%s serves HTTPS: give the address as https://%s", c.Addr, strings.TrimPrefix(c.Addr, "http://"))
	}
	if resp.StatusCode/100 != 2 {
		// Some answers (/readyz, /healthz) carry their body with a 503.
		_ = json.Unmarshal(answer, out)
		var eb apitype.ErrorBody
		if json.Unmarshal(answer, &eb) != nil || eb.Error == "" {
			eb = apitype.ErrorBody{Error: strings.TrimSpace(string(answer))}
		}
		if eb.RequestID == "" {
			eb.RequestID = resp.Header.Get(requestIDHeader)
		}
		return &StatusError{Code: resp.StatusCode, Method: method, Msg: eb.Error, Detail: eb.Detail, RequestID: eb.RequestID,
			Refused: resp.Header.Get(RefusedHeader) != ""}
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("decode answer of %s%s: %w", c.Addr, path, err)
	}
	return nil
}

// Nodes lists the node records.
func (c *Client) Nodes(ctx context.Context) ([]apitype.Node, error) {
	var ns []apitype.Node
	return ns, c.get(ctx, "/v1/nodes", &ns)
}

// Node returns one node record.
func (c *Client) Node(ctx context.Context, name string) (apitype.Node, error) {
	var n apitype.Node
	return n, c.get(ctx, "/v1/nodes/"+url.PathEscape(name), &n)
}

// Leader returns the current master.
func (c *Client) Leader(ctx context.Context) (apitype.Leader, error) {
	var l apitype.Leader
	return l, c.get(ctx, "/v1/leader", &l)
}

// Status returns the cluster's status as this node sees it.
func (c *Client) Status(ctx context.Context) (apitype.Status, error) {
	var s apitype.Status
	return s, c.get(ctx, "/v1/status", &s)
}

// Run returns one run with what it did per workflow task.
func (c *Client) Run(ctx context.Context, id int64) (apitype.RunDetail, error) {
	var d apitype.RunDetail
	return d, c.get(ctx, "/v1/runs/"+strconv.FormatInt(id, 10), &d)
}

// Ready returns the node's readiness; a 503 comes with a *StatusError.
func (c *Client) Ready(ctx context.Context) (apitype.Ready, error) {
	var r apitype.Ready
	return r, c.get(ctx, "/readyz", &r)
}

// Ack acknowledges the unexpected shutdown of node name.
func (c *Client) Ack(ctx context.Context, name, reason string) (apitype.Node, error) {
	var n apitype.Node
	return n, c.do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(name)+"/ack", apitype.AckRequest{Reason: reason}, &n)
}

// ResetGrade resets the failover grade of node name to NORMAL.
func (c *Client) ResetGrade(ctx context.Context, name, reason string) (apitype.GradeChange, error) {
	var g apitype.GradeChange
	return g, c.do(ctx, http.MethodPost, "/v1/nodes/"+url.PathEscape(name)+"/reset-grade", apitype.AckRequest{Reason: reason}, &g)
}

// Check runs a CheckEngineHealth pass on the master now.
func (c *Client) Check(ctx context.Context, req apitype.CheckRequest) (apitype.CheckResult, error) {
	var res apitype.CheckResult
	return res, c.do(ctx, http.MethodPost, "/v1/check", req, &res)
}

// Pause stops automatic repair cluster-wide (paused true) or lets it go
// on.
func (c *Client) Pause(ctx context.Context, paused bool, reason string) (apitype.Pause, error) {
	var p apitype.Pause
	path := "/v1/resume"
	if paused {
		path = "/v1/pause"
	}
	return p, c.do(ctx, http.MethodPost, path, apitype.AckRequest{Reason: reason}, &p)
}

// Recover runs (or, with DryRun, plans) a recovery run on the master.
func (c *Client) Recover(ctx context.Context, req apitype.RecoveryRequest) (apitype.RecoveryAnswer, error) {
	var a apitype.RecoveryAnswer
	return a, c.do(ctx, http.MethodPost, "/v1/recovery", req, &a)
}

// Runs lists the latest runs.
func (c *Client) Runs(ctx context.Context, limit int) ([]apitype.Run, error) {
	var rs []apitype.Run
	return rs, c.get(ctx, fmt.Sprintf("/v1/runs?limit=%d", limit), &rs)
}

// Events lists events after an id.
func (c *Client) Events(ctx context.Context, p audit.ListParams) ([]apitype.Event, error) {
	var es []apitype.Event
	q := url.Values{}
	q.Set("after", strconv.FormatInt(p.AfterID, 10))
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	for k, v := range map[string]string{"node": p.Node, "workflow": p.Workflow, "instance": p.Instance, "kind": string(p.Kind)} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if p.RunID != 0 {
		q.Set("run", strconv.FormatInt(p.RunID, 10))
	}
	for k, t := range map[string]*time.Time{"since": p.Since, "until": p.Until} {
		if t != nil {
			q.Set(k, t.Format(time.RFC3339Nano))
		}
	}
	return es, c.get(ctx, "/v1/events?"+q.Encode(), &es)
}

// Health returns the daemon's liveness; a 503 is returned as the body with
// a *StatusError.
func (c *Client) Health(ctx context.Context) (apitype.Health, error) {
	var h apitype.Health
	return h, c.get(ctx, "/healthz", &h)
}

// Holds lists open holds (of workflow, when set).
func (c *Client) Holds(ctx context.Context, workflow string, limit int) ([]apitype.Hold, error) {
	var hs []apitype.Hold
	q := url.Values{}
	if workflow != "" {
		q.Set("workflow", workflow)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return hs, c.get(ctx, "/v1/holds?"+q.Encode(), &hs)
}

// DecideHolds applies a decision (recovery.DecideRetry or DecideFail) to
// holds, on the master.
func (c *Client) DecideHolds(ctx context.Context, action string, req apitype.HoldsRequest) (apitype.HoldResult, error) {
	var res apitype.HoldResult
	return res, c.do(ctx, http.MethodPost, "/v1/holds/"+url.PathEscape(action), req, &res)
}

// Retry retries one instance now, by hand, on the master.
func (c *Client) Retry(ctx context.Context, req apitype.RetryRequest) (apitype.RetryResult, error) {
	var res apitype.RetryResult
	return res, c.do(ctx, http.MethodPost, "/v1/retry", req, &res)
}

// Instance returns what the daemon knows of one instance.
func (c *Client) Instance(ctx context.Context, ref apitype.Ref, limit int) (apitype.InstanceView, error) {
	var v apitype.InstanceView
	// The query form: any id fits it, one with slashes, empty, "." or
	// ".." segments included.
	q := url.Values{"workflow": {ref.Workflow}, "id": {ref.Instance}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return v, c.get(ctx, "/v1/instances?"+q.Encode(), &v)
}

// RetryStats returns the retry statistics by workflow and task.
func (c *Client) RetryStats(ctx context.Context) ([]apitype.RetryStats, error) {
	var st []apitype.RetryStats
	return st, c.get(ctx, "/v1/retries/stats", &st)
}
