package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/nodes"
)

// ErrUnreachable: no daemon answered at the address.
var ErrUnreachable = errors.New("no enginehealth daemon answered")

// Client calls a daemon's API.
type Client struct {
	// Addr is host:port or a base URL.
	Addr string
	// Token for mutations.
	Token string
	HTTP  *http.Client
}

// NewClient returns a client of the daemon at addr.
func NewClient(addr, token string) *Client {
	return &Client{Addr: addr, Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

func (c *Client) url(path string) string {
	base := c.Addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return strings.TrimSuffix(base, "/") + path
}

// StatusError is a non-2xx answer of the daemon.
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string { return fmt.Sprintf("daemon answered %d: %s", e.Code, e.Msg) }

func (c *Client) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(path), nil)
	if err != nil {
		return err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, c.Addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer of %s: %w", c.Addr, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb ErrorBody
		if json.Unmarshal(body, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(body))
		}
		return &StatusError{Code: resp.StatusCode, Msg: eb.Error}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode answer of %s%s: %w", c.Addr, path, err)
	}
	return nil
}

// Nodes lists the node records.
func (c *Client) Nodes(ctx context.Context) ([]nodes.Node, error) {
	var ns []nodes.Node
	return ns, c.get(ctx, "/v1/nodes", &ns)
}

// Node returns one node record.
func (c *Client) Node(ctx context.Context, name string) (nodes.Node, error) {
	var n nodes.Node
	return n, c.get(ctx, "/v1/nodes/"+url.PathEscape(name), &n)
}

// Health returns the daemon's liveness; a 503 is returned as the body with
// a *StatusError.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	return h, c.get(ctx, "/healthz", &h)
}
