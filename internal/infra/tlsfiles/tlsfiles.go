// Package tlsfiles builds the client side of a TLS setting from PEM files:
// a CA file that verifies the servers, and a client certificate with its
// key. It checks at load what a handshake would otherwise find out late,
// or not say at all: a file that is missing, unreadable or not PEM, a CA
// file without a certificate, a key that is not the certificate's, a
// certificate out of its validity or not made for client authentication.
// Each problem names the key path of the setting and the file, never what
// the file holds.
//
// The client certificate is served through tls.Config.GetClientCertificate
// from a Cert holder, so that a reload can swap it (Cert.Store) under a
// client that keeps running: every new handshake presents the new one.
package tlsfiles

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/safefile"
)

// MaxFileBytes bounds one PEM file (a CA bundle of a few hundred
// certificates fits).
const MaxFileBytes = 1 << 20

// Files are the PEM files of one TLS setting; each is optional, but
// CertFile and KeyFile go together.
type Files struct {
	// CAFile holds the certificates that verify the servers; without it,
	// the system's roots do.
	CAFile string
	// CertFile and KeyFile: the client certificate (with any
	// intermediates after it) and its unencrypted private key.
	CertFile, KeyFile string
}

// Problem is one thing wrong with a TLS setting.
type Problem struct {
	// Key is the key path of the file's setting, e.g. "etcd.tls.ca_file".
	Key string
	// Msg says what is wrong, naming the file.
	Msg string
}

// String returns the problem as "key: message".
func (p Problem) String() string { return p.Key + ": " + p.Msg }

// Error lists every problem of a TLS setting.
type Error struct{ Problems []Problem }

// Error joins the problems with "; ".
func (e *Error) Error() string {
	s := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		s[i] = p.String()
	}
	return strings.Join(s, "; ")
}

// ClientTLS is the client side of a TLS setting, loaded from its files.
type ClientTLS struct {
	// Config asks for TLS 1.2 at least, servers verified against the CA file
	// (the system's roots without one), the client certificate served
	// from Cert.
	Config *tls.Config
	// Cert holds the client certificate Config presents (nil without
	// one).
	Cert *Cert
	// CAs holds the CA file's pool and certificates (nil without a CA
	// file): Config.RootCAs is its pool at load; a dialer made with
	// DialFunc or GRPCDialer verifies each connection against the pool
	// it holds then, so a reload that stores a new one applies to the
	// next connections.
	CAs *CAs
}

// Client loads files and returns the client side of the setting: with
// CertFile and KeyFile, the client certificate is served from its Cert.
// prefix is the key path of the setting ("etcd.tls"): problems name
// prefix.ca_file, prefix.cert_file and prefix.key_file. now decides
// validity. The error is an *Error listing every problem.
func Client(prefix string, f Files, now time.Time) (*ClientTLS, error) {
	var problems []Problem
	c := &ClientTLS{Config: &tls.Config{MinVersion: tls.VersionTLS12}}
	if f.CAFile != "" {
		p, certs, ps := pool(prefix+".ca_file", f.CAFile, now)
		problems = append(problems, ps...)
		c.Config.RootCAs = p
		c.CAs = &CAs{}
		c.CAs.Set(p, certs)
	}
	switch {
	case f.CertFile != "" && f.KeyFile == "":
		problems = append(problems, Problem{prefix + ".key_file", "required with " + prefix + ".cert_file: the key of " + fileText(f.CertFile)})
	case f.CertFile == "" && f.KeyFile != "":
		problems = append(problems, Problem{prefix + ".cert_file", "required with " + prefix + ".key_file: the certificate of the key " + fileText(f.KeyFile)})
	case f.CertFile != "":
		cert, ps := keyPair(prefix, f.CertFile, f.KeyFile, now, ClientAuth)
		if len(ps) > 0 {
			problems = append(problems, ps...)
			break
		}
		c.Cert = &Cert{}
		c.Cert.Store(cert)
		c.Config.GetClientCertificate = c.Cert.GetClientCertificate
	}
	return orError(c, problems)
}

// Pool loads a CA file: PEM, with at least one certificate, one of them
// valid at now. Problems are named prefix.ca_file.
func Pool(prefix, file string, now time.Time) (*x509.CertPool, error) {
	p, _, problems := pool(prefix+".ca_file", file, now)
	return orError(p, problems)
}

// pool loads a CA file as Pool does, and returns its certificates too;
// problems are named key.
func pool(key, file string, now time.Time) (*x509.CertPool, []*x509.Certificate, []Problem) {
	certs, others, err := certificates(file, "")
	if err != nil {
		return nil, nil, []Problem{{key, err.Error()}}
	}
	// A CA's key beside its certificate: the CA would sign for anyone who
	// reads this node's files.
	if slices.ContainsFunc(others, func(t string) bool { return strings.HasSuffix(t, "PRIVATE KEY") }) {
		return nil, nil, []Problem{{key, fmt.Sprintf("%s holds a private key besides its certificates: a CA file holds certificates only (keep the CA's key off the nodes)", fileText(file))}}
	}
	p := x509.NewCertPool()
	var invalid []string
	for _, c := range certs {
		p.AddCert(c)
		if why := validity(c, now); why != "" {
			invalid = append(invalid, why)
		}
	}
	// An expired CA among valid ones is a bundle mid-rotation; with none
	// valid, no server can be verified.
	if len(invalid) == len(certs) {
		msg := fmt.Sprintf("%s: its certificate %s", fileText(file), invalid[0])
		if len(certs) > 1 {
			msg = fmt.Sprintf("%s: none of its %d certificates is valid now (the first %s)", fileText(file), len(certs), invalid[0])
		}
		return nil, nil, []Problem{{key, msg}}
	}
	return p, certs, nil
}

// Usage is what a certificate must be made for (its extended key usage;
// a certificate without one is good for any).
type Usage int

// Usages a certificate may be made for; they combine.
const (
	ClientAuth Usage = 1 << iota // presented by a client
	ServerAuth                   // presented by a server
)

func (u Usage) wants() []x509.ExtKeyUsage {
	var eku []x509.ExtKeyUsage
	if u&ServerAuth != 0 {
		eku = append(eku, x509.ExtKeyUsageServerAuth)
	}
	if u&ClientAuth != 0 {
		eku = append(eku, x509.ExtKeyUsageClientAuth)
	}
	return eku
}

var usageNames = map[x509.ExtKeyUsage]string{x509.ExtKeyUsageServerAuth: "serverAuth", x509.ExtKeyUsageClientAuth: "clientAuth"}

// KeyPair loads a certificate and its key: PEM, the key unencrypted and
// the certificate's, the certificate valid at now and made for usage.
// Problems are named prefix.cert_file or prefix.key_file. A reload stores
// the result in a Cert.
func KeyPair(prefix, certFile, keyFile string, now time.Time, usage Usage) (*tls.Certificate, error) {
	return orError(keyPair(prefix, certFile, keyFile, now, usage))
}

func keyPair(prefix, certFile, keyFile string, now time.Time, usage Usage) (*tls.Certificate, []Problem) {
	certKey, keyKey := prefix+".cert_file", prefix+".key_file"
	var problems []Problem
	certs, _, err := certificates(certFile, swapped)
	if err != nil {
		problems = append(problems, Problem{certKey, err.Error()})
	}
	keyPEM, err := privateKey(keyFile)
	if err != nil {
		problems = append(problems, Problem{keyKey, err.Error()})
	}
	if len(problems) > 0 {
		return nil, problems
	}
	leaf := certs[0]
	if why := validity(leaf, now); why != "" {
		problems = append(problems, Problem{certKey, fmt.Sprintf("%s: the certificate %s", fileText(certFile), why)})
	}
	for _, want := range usage.wants() {
		if len(leaf.ExtKeyUsage) > 0 && !slices.Contains(leaf.ExtKeyUsage, want) && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
			role := map[x509.ExtKeyUsage]string{x509.ExtKeyUsageServerAuth: "server", x509.ExtKeyUsageClientAuth: "client"}[want]
			problems = append(problems, Problem{certKey, fmt.Sprintf("%s: the certificate (%s) is not for %s authentication: its extended key usage lacks %s", fileText(certFile), subject(leaf), role, usageNames[want])})
		}
	}
	var certPEM []byte
	for _, c := range certs {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// Go's messages hold no key material; say which files.
		why := strings.TrimPrefix(err.Error(), "tls: ")
		if strings.Contains(why, "does not match") {
			why = fmt.Sprintf("the key does not match the certificate in %s (%s)", fileText(certFile), why)
		}
		problems = append(problems, Problem{keyKey, fmt.Sprintf("%s: %s", fileText(keyFile), why)})
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return &pair, nil
}

// orError turns a problem list into an *Error (nil when empty).
func orError[T any](v *T, problems []Problem) (*T, error) {
	if len(problems) > 0 {
		return nil, &Error{problems}
	}
	return v, nil
}

// Cert holds the client certificate a tls.Config presents; Store swaps it
// for the next handshakes, while connections keep running.
type Cert struct {
	p atomic.Pointer[tls.Certificate]
}

// Store makes c the certificate of every later handshake.
func (h *Cert) Store(c *tls.Certificate) { h.p.Store(c) }

// Load returns the certificate presented now (its Leaf is set).
func (h *Cert) Load() *tls.Certificate { return h.p.Load() }

// Chain returns the certificate presented now and the intermediates
// sent with it, parsed, leaf first (nil when none is held, or h is nil):
// for watching their expiry. It reads the holder at each call, so a swap
// shows at once.
func (h *Cert) Chain() []*x509.Certificate {
	if h == nil {
		return nil
	}
	c := h.p.Load()
	if c == nil || len(c.Certificate) == 0 {
		return nil
	}
	chain := make([]*x509.Certificate, 0, len(c.Certificate))
	for i, der := range c.Certificate {
		if i == 0 && c.Leaf != nil {
			chain = append(chain, c.Leaf)
			continue
		}
		// Parsed at load already: an error cannot happen here.
		if x, err := x509.ParseCertificate(der); err == nil {
			chain = append(chain, x)
		}
	}
	return chain
}

// GetClientCertificate is the tls.Config hook: the certificate held now,
// whatever the server asks for (a server that trusts another CA refuses
// it, and says so).
func (h *Cert) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if c := h.p.Load(); c != nil {
		return c, nil
	}
	return &tls.Certificate{}, nil // none: the server decides
}

// GetCertificate is the tls.Config hook of a server: the certificate held
// now.
func (h *Cert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := h.p.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no certificate loaded")
}

// CAs holds a CA pool a running TLS setting verifies peers with; Store
// swaps it for the next handshakes.
type CAs struct {
	p atomic.Pointer[caSet]
}

type caSet struct {
	pool  *x509.CertPool
	certs []*x509.Certificate
}

// Store makes pool the CAs of every later handshake.
func (h *CAs) Store(pool *x509.CertPool) { h.Set(pool, nil) }

// Set makes pool, made of certs, the CAs of every later handshake (the
// certificates are kept for their expiry).
func (h *CAs) Set(pool *x509.CertPool, certs []*x509.Certificate) {
	h.p.Store(&caSet{pool, certs})
}

// Load returns the pool used now.
func (h *CAs) Load() *x509.CertPool {
	if s := h.p.Load(); s != nil {
		return s.pool
	}
	return nil
}

// Certs returns the certificates of the pool used now (nil when only a
// pool was stored).
func (h *CAs) Certs() []*x509.Certificate {
	if h == nil {
		return nil
	}
	if s := h.p.Load(); s != nil {
		return s.certs
	}
	return nil
}

// LoadCAs loads a CA file into a new holder (see Pool); problems are
// named key.
func LoadCAs(key, file string, now time.Time) (*CAs, error) {
	p, certs, problems := pool(key, file, now)
	if len(problems) > 0 {
		return nil, &Error{problems}
	}
	h := &CAs{}
	h.Set(p, certs)
	return h, nil
}

// ServerFiles are the PEM files of a server's TLS setting.
type ServerFiles struct {
	// CertFile and KeyFile: the server's certificate and key (required).
	CertFile, KeyFile string
	// ClientCAFile verifies client certificates (optional).
	ClientCAFile string
	// ClientAuth says whether a client certificate is asked for and
	// required (tls.NoClientCert without ClientCAFile).
	ClientAuth tls.ClientAuthType
}

// Server loads files and returns a server *tls.Config (TLS 1.2 at
// least) whose certificate comes from the returned Cert and whose client
// CAs come from the returned CAs (nil without ClientCAFile): a reload
// stores new ones, and every later handshake uses them. usage is what
// the certificate must be made for (ServerAuth, and ClientAuth too when
// the same certificate is presented to other servers). Problems are
// named prefix.cert_file, prefix.key_file and prefix.client_ca_file.
func Server(prefix string, f ServerFiles, usage Usage, now time.Time) (*tls.Config, *Cert, *CAs, error) {
	var problems []Problem
	switch {
	case f.CertFile == "":
		problems = append(problems, Problem{prefix + ".cert_file", "required: the server's certificate"})
	case f.KeyFile == "":
		problems = append(problems, Problem{prefix + ".key_file", "required with " + prefix + ".cert_file: the key of " + fileText(f.CertFile)})
	}
	if f.KeyFile != "" && f.CertFile == "" {
		problems = append(problems, Problem{prefix + ".cert_file", "required with " + prefix + ".key_file: the certificate of the key " + fileText(f.KeyFile)})
	}
	var cert *tls.Certificate
	if len(problems) == 0 {
		var ps []Problem
		cert, ps = keyPair(prefix, f.CertFile, f.KeyFile, now, usage)
		problems = append(problems, ps...)
	}
	var cas *CAs
	if f.ClientCAFile != "" {
		p, certs, ps := pool(prefix+".client_ca_file", f.ClientCAFile, now)
		problems = append(problems, ps...)
		cas = &CAs{}
		cas.Set(p, certs)
	}
	if len(problems) > 0 {
		return nil, nil, nil, &Error{problems}
	}
	holder := &Cert{}
	holder.Store(cert)
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: holder.GetCertificate}
	if cas != nil {
		cfg.ClientAuth = f.ClientAuth
		base := cfg.Clone()
		cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := base.Clone()
			c.ClientCAs = cas.Load()
			return c, nil
		}
	}
	return cfg, holder, cas, nil
}

// DialFunc returns a TLS dial function (for http.Transport's
// DialTLSContext) whose every connection verifies the server against the
// pool cas holds at that moment (nil cas: base's RootCAs, else the
// system's roots), for base's ServerName or else the host dialled, and
// otherwise uses base (its client certificate, its minimum version): a
// reload of the CA file applies to the next connections.
func DialFunc(base *tls.Config, cas *CAs) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		return dial(ctx, connConfig(base, cas, host), network, addr)
	}
}

// GRPCDialer is DialFunc for grpc.WithContextDialer, with addresses as the
// etcd client gives them: host:port, or unix:path and unix:///path (a
// socket, verified as its file name, as the etcd client does). Each
// connection offers HTTP/2 (ALPN h2), as gRPC's own TLS does. The etcd
// client is then given host:port endpoints and no TLS of its own, so that
// every connection to a member is verified against the CAs held when it is
// made: the client's own TLS fixes its CAs when it is created.
func GRPCDialer(base *tls.Config, cas *CAs) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		if p, ok := strings.CutPrefix(addr, "unix:"); ok {
			if strings.HasPrefix(p, "///") {
				p = p[2:]
			}
			cfg := connConfig(base, cas, filepath.Base(p))
			cfg.NextProtos = []string{"h2"}
			return dial(ctx, cfg, "unix", p)
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		cfg := connConfig(base, cas, host)
		cfg.NextProtos = []string{"h2"}
		return dial(ctx, cfg, "tcp", addr)
	}
}

// connConfig is base for one connection to host: verified as base's
// ServerName, or else host, against the pool cas holds now.
func connConfig(base *tls.Config, cas *CAs, host string) *tls.Config {
	cfg := base.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	if cas != nil {
		cfg.RootCAs = cas.Load()
	}
	return cfg
}

func dial(ctx context.Context, cfg *tls.Config, network, addr string) (net.Conn, error) {
	// The timeout covers the handshake too: http.DefaultTransport's.
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}, Config: cfg}
	return d.DialContext(ctx, network, addr)
}

// swapped is the hint when a certificate or key file holds the other.
const swapped = " (are cert_file and key_file swapped?)"

// certificates reads the X.509 certificates of a PEM file; hint follows
// the message when the file holds a key instead. others: the types of
// the PEM blocks that are not certificates.
func certificates(file, hint string) (certs []*x509.Certificate, others []string, err error) {
	blocks, err := pemBlocks(file)
	if err != nil {
		return nil, nil, err
	}
	for _, b := range blocks {
		if b.Type != "CERTIFICATE" {
			others = append(others, b.Type)
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: certificate %d does not parse: %v", fileText(file), len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, nil, fmt.Errorf("%s holds no certificate, only %s", fileText(file), blockTypes(others, hint))
	}
	return certs, others, nil
}

// privateKey reads a PEM file that holds a private key and returns its
// PEM text (for tls.X509KeyPair).
func privateKey(file string) ([]byte, error) {
	blocks, err := pemBlocks(file)
	if err != nil {
		return nil, err
	}
	var types []string
	for _, b := range blocks {
		switch {
		case b.Type == "ENCRYPTED PRIVATE KEY" || b.Headers["Proc-Type"] != "":
			return nil, fmt.Errorf("%s holds an encrypted key: give the key unencrypted (protected by the file's mode)", fileText(file))
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			return pem.EncodeToMemory(b), nil
		}
		types = append(types, b.Type)
	}
	return nil, fmt.Errorf("%s holds no private key, only %s", fileText(file), blockTypes(types, swapped))
}

// pemBlocks reads every PEM block of a file.
func pemBlocks(file string) ([]*pem.Block, error) {
	data, err := readFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", fileText(file), err)
	}
	var blocks []*pem.Block
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		blocks = append(blocks, b)
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("%s is not PEM: it holds no -----BEGIN block", fileText(file))
	}
	return blocks, nil
}

// blockTypes says which PEM blocks a file holds instead of the one
// wanted; hint follows a certificate or a key.
func blockTypes(types []string, hint string) string {
	switch {
	case slices.Contains(types, "CERTIFICATE"):
		return "a certificate" + hint
	case slices.ContainsFunc(types, func(t string) bool { return strings.HasSuffix(t, "PRIVATE KEY") }):
		return "a private key" + hint
	}
	quoted := make([]string, len(types))
	for i, t := range types {
		quoted[i] = strconv.Quote(t)
	}
	return "PEM blocks of type " + strings.Join(quoted, ", ")
}

// validity says why c is not valid at now ("" when it is).
func validity(c *x509.Certificate, now time.Time) string {
	switch {
	case now.After(c.NotAfter):
		return fmt.Sprintf("(%s) expired on %s", subject(c), c.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(c.NotBefore):
		return fmt.Sprintf("(%s) is not valid before %s", subject(c), c.NotBefore.UTC().Format(time.RFC3339))
	}
	return ""
}

func subject(c *x509.Certificate) string {
	if c.Subject.CommonName != "" {
		return "CN " + strconv.Quote(c.Subject.CommonName)
	}
	return "serial " + c.SerialNumber.String()
}

// readFile reads a regular file of at most MaxFileBytes (safefile.Read);
// it never blocks on a FIFO or a device.
func readFile(path string) ([]byte, error) {
	data, err := safefile.Read(path, MaxFileBytes)
	if pe := (*os.PathError)(nil); errors.As(err, &pe) {
		return nil, pe.Err
	}
	return data, err
}

// fileText is a path as a message says it: as it is when printable and
// at most 256 bytes, else a quoted excerpt (a path from a configuration
// can be anything).
func fileText(p string) string {
	if len(p) <= 256 && !strings.ContainsFunc(p, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return p
	}
	if len(p) > 64 {
		return strconv.Quote(strings.ToValidUTF8(p[:64], "")) + fmt.Sprintf("…(%d bytes)", len(p))
	}
	return strconv.Quote(p)
}
