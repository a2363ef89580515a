package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/nodes"
)

// Who may use the API. An Authenticator finds who sent a request (an
// Identity: a name and a role); the routes say which role they need:
// mutations RoleOperate, reads RoleRead with Config.AuthReads (else none);
// /healthz, /readyz, /metrics and /v1/leader?local=true need none.
// Tokens is the authenticator of bearer tokens; a client-certificate one
// (the certificate's CN as the name) can stand beside it.

// Role is what an operator may do.
type Role string

// Roles: read may use every read (GET /v1/* and the status page), operate
// everything.
const (
	RoleRead    Role = "read"
	RoleOperate Role = "operate"
)

// covers reports whether role r may do what needs role need.
func (r Role) covers(need Role) bool {
	return r == RoleOperate || r == need
}

// Identity is who sent a request, as an Authenticator found it.
type Identity struct {
	// Name is recorded as the actor of the operator's actions ("alice
	// (operator)").
	Name string
	Role Role
	// Cert means the identity is named by a client certificate (which grants
	// read only).
	Cert bool
}

// Errors of an Authenticator.
var (
	// ErrNoCredential means the request carries no credential the
	// authenticator reads (answered 401; not a failed attempt).
	ErrNoCredential = errors.New("no credential")
	// ErrBadCredential means the request carries a credential that is wrong
	// (answered 401, and counted against its address: see authFailures).
	ErrBadCredential = errors.New("wrong credential")
)

// Authenticator finds who sent a request. It returns ErrNoCredential when
// the request carries no credential it reads and ErrBadCredential when
// it carries a wrong one. It must not block.
type Authenticator interface {
	Authenticate(r *http.Request) (Identity, error)
}

// Operator is one named bearer token, known by its SHA-256 only.
type Operator struct {
	Name   string
	SHA256 [sha256.Size]byte
	Role   Role
}

// Tokens authenticates bearer tokens against a set of operators. The set
// can be replaced while requests are served (Set), e.g. to reload it.
type Tokens struct {
	set atomic.Pointer[[]Operator]
}

// NewTokens returns the authenticator of ops (see Set).
func NewTokens(ops []Operator) (*Tokens, error) {
	t := &Tokens{}
	return t, t.Set(ops)
}

// Set replaces the operators, which must be at least one, each with a
// valid name (the rule of node names), a known role, and a name and hash
// of its own. Requests being authenticated see the old set or the new
// one, never a mix.
func (t *Tokens) Set(ops []Operator) error {
	if len(ops) == 0 {
		return errors.New("api: no operators")
	}
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]bool{}
	for i, o := range ops {
		switch {
		case nodes.ValidName(o.Name) != nil:
			return fmt.Errorf("api: operator %d: not a valid name", i)
		case o.Role != RoleRead && o.Role != RoleOperate:
			return fmt.Errorf("api: operator %s: unknown role %s", o.Name, quoteShort(string(o.Role)))
		case names[o.Name]:
			return fmt.Errorf("api: operator %s named twice", o.Name)
		case hashes[o.SHA256]:
			return fmt.Errorf("api: operator %s: the token hash of another operator", o.Name)
		}
		names[o.Name], hashes[o.SHA256] = true, true
	}
	own := append([]Operator(nil), ops...)
	t.set.Store(&own)
	return nil
}

// Operators returns the operators of the set used now.
func (t *Tokens) Operators() []Operator {
	if set := t.set.Load(); set != nil {
		return append([]Operator(nil), (*set)...)
	}
	return nil
}

// Authenticate reads the bearer token of r's Authorization header (the
// scheme in any case, RFC 7235; the token exact). Its SHA-256 is compared
// with every operator's, each comparison in constant time and all of
// them made: how long it takes does not say which operator, if any,
// matched.
func (t *Tokens) Authenticate(r *http.Request) (Identity, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Identity{}, ErrNoCredential
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Identity{}, ErrBadCredential
	}
	sum := sha256.Sum256([]byte(token))
	set := t.set.Load()
	if set == nil { // a Tokens whose first Set failed knows no one
		return Identity{}, ErrBadCredential
	}
	ops := *set
	found, at := 0, 0
	for i := range ops {
		eq := subtle.ConstantTimeCompare(sum[:], ops[i].SHA256[:])
		at = subtle.ConstantTimeSelect(eq, i, at)
		found |= eq
	}
	if found == 0 {
		return Identity{}, ErrBadCredential
	}
	return Identity{Name: ops[at].Name, Role: ops[at].Role}, nil
}

// ClientCerts authenticates a client certificate the TLS handshake
// verified (against api.tls.client_ca_file): its subject's common name is
// the name, with role read. A certificate whose CN is not a valid name
// (the rule of node names) names no one.
type ClientCerts struct{}

// Authenticate implements Authenticator.
func (ClientCerts) Authenticate(r *http.Request) (Identity, error) {
	cn, ok := verifiedCN(r)
	if !ok || nodes.ValidName(cn) != nil {
		return Identity{}, ErrNoCredential
	}
	return Identity{Name: cn, Role: RoleRead, Cert: true}, nil
}

// Either authenticates with first, and with second when the request
// carries no credential first reads (a wrong one is wrong: no second
// chance). A nil one is skipped.
func Either(first, second Authenticator) Authenticator {
	switch {
	case first == nil:
		return second
	case second == nil:
		return first
	}
	return either{first, second}
}

type either struct{ first, second Authenticator }

func (e either) Authenticate(r *http.Request) (Identity, error) {
	id, err := e.first.Authenticate(r)
	if errors.Is(err, ErrNoCredential) {
		return e.second.Authenticate(r)
	}
	return id, err
}

type identityKey struct{}

// identityOf returns who sent the request ctx belongs to, when it was
// authenticated.
func identityOf(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// authorize runs next for a request whose sender has role need: 429 with
// Retry-After while its address is locked out after failed attempts (see
// authFailures), 400 with more than one Authorization header, 401 with
// WWW-Authenticate without a credential or with a wrong one, 403 naming
// the role needed when the sender's does not cover it.
func (h *handler) authorize(need Role, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		addr := remoteHost(r)
		if wait, locked := h.fails.locked(addr); locked {
			secs := strconv.Itoa(int(wait.Seconds() + 0.999))
			w.Header().Set("Retry-After", secs)
			writeProblem(w, http.StatusTooManyRequests, "too many failed authentications from this address: try again in "+secs+"s",
				fmt.Sprintf("%d failures within %s lock an address out for %s", authFailLimit, authFailWindow, authLockout))
			return
		}
		// One credential: with several, which one counts would depend on
		// their order (and on each proxy on the way).
		if len(r.Header.Values("Authorization")) > 1 {
			writeProblem(w, http.StatusBadRequest, "header Authorization: given more than once", "send one bearer token")
			return
		}
		id, err := h.cfg.Auth.Authenticate(r)
		if err != nil {
			if !errors.Is(err, ErrNoCredential) && h.fails.fail(addr) {
				h.reqLog(r).WarnContext(r.Context(), "too many failed authentications: locking the address out (logged once per lockout)",
					"remote", addr, "failures", authFailLimit, "within", authFailWindow.String(), "for", authLockout.String())
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="enginehealth"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		if !id.Role.covers(need) {
			who := "operator " + id.Name + " has role " + string(id.Role)
			if id.Cert {
				who = "the client certificate of " + id.Name + " grants role read only (send a token for more)"
			}
			writeProblem(w, http.StatusForbidden, who+": this needs role "+string(need), "ask for a token of role "+string(need))
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	}
}

// remoteHost is the host of the request's peer address (never a
// forwarding header, which the client writes).
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// mutation guards a state-changing route: it needs role operate.
func (h *handler) mutation(next http.HandlerFunc) http.HandlerFunc {
	guarded := h.authorize(RoleOperate, func(w http.ResponseWriter, r *http.Request) {
		// The node that does it: this one, unless forward says otherwise.
		w.Header().Set(NodeHeader, h.cfg.Self)
		next(w, r)
	})
	return func(w http.ResponseWriter, r *http.Request) {
		if h.cfg.Auth == nil {
			writeError(w, http.StatusForbidden, "mutations are off: no operator is configured (api.tokens_file, api.token_file or api.token_env)")
			return
		}
		guarded(w, r)
	}
}

// read guards a read: with Config.AuthReads it needs role read, else it
// is open.
func (h *handler) read(next http.HandlerFunc) http.HandlerFunc {
	if !h.cfg.AuthReads {
		return next
	}
	return h.authorize(RoleRead, next)
}

// operator is who an operator's request is recorded as done by: the
// actor "<name> (operator)", the name the token has on this node, via
// the node that took the request from the operator (see via).
func (h *handler) operator(r *http.Request) audit.By {
	id, _ := identityOf(r.Context())
	return audit.By{Actor: id.Name + " (operator)", Via: h.via(r)}
}

// via is the node that took the request from the operator: this one, or
// the node that forwarded it here (the token came with it and was
// checked here again). The forwarding node is named by a header, which
// anyone with a token can send, so it counts only when proven as far as
// this node can: it names a registered node, and, when the request came
// with a verified client certificate, the certificate's holder (its CN);
// with client CAs configured (Config.VerifyForwarders) a request without
// a certificate proves nothing, since every node presents its own when it
// forwards. A header that is not proven is logged, and this node is
// recorded.
func (h *handler) via(r *http.Request) string {
	via := r.Header.Get(forwardedHeader)
	if via == "" || nodes.ValidName(via) != nil || via == h.cfg.Self {
		return h.cfg.Self
	}
	cn, hasCert := verifiedCN(r)
	var why string
	switch {
	case hasCert && cn != via:
		why = "the request's client certificate is another's"
	case !hasCert && h.cfg.VerifyForwarders:
		why = "the request came without a client certificate (nodes forward with theirs)"
	case h.cfg.Nodes != nil:
		if _, err := h.cfg.Nodes.Get(r.Context(), via); err != nil {
			why = "no registered node has that name"
		}
	}
	if why != "" {
		h.reqLog(r).WarnContext(r.Context(), "a forwarded request names a node it does not prove: recorded as taken by this node",
			"forwarded_by", via, "why", why, "certificate_cn", cn)
		return h.cfg.Self
	}
	return via
}

// verifiedCN returns the subject common name of the request's client
// certificate, when the handshake verified one.
func verifiedCN(r *http.Request) (string, bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return "", false
	}
	return r.TLS.VerifiedChains[0][0].Subject.CommonName, true
}
