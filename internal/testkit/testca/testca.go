// Package testca is a certificate authority for tests: it makes a CA and
// issues server and client certificates signed by it, in memory, and
// writes them as PEM files into a test's temporary directory. No key is
// ever committed: every run makes its own.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	// Name is the CA's common name.
	Name string
	// CertFile is the CA certificate, PEM, in Dir.
	CertFile string
	// Dir holds every file the CA writes.
	Dir string

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial atomic.Int64

// New makes a CA named name that writes its files into dir (a test's
// TempDir). Its certificate is valid from an hour ago for ten years.
func New(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"enginehealth tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{Name: name, Dir: dir, cert: cert, key: key,
		pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	ca.CertFile = filepath.Join(dir, safe(name)+"-ca.pem")
	if err := os.WriteFile(ca.CertFile, ca.pem, 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

// Pool returns a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// PEM returns the CA certificate in PEM.
func (ca *CA) PEM() []byte { return append([]byte(nil), ca.pem...) }

// Options of one certificate. With neither Server nor Client set, the
// certificate is good for both.
type Options struct {
	// Hosts lists DNS names and IP addresses the certificate is for
	// (server use); default "localhost" and 127.0.0.1.
	Hosts []string
	// Server / Client: the extended key usages.
	Server, Client bool
	// NotBefore / NotAfter; default: valid from an hour ago for a year.
	NotBefore, NotAfter time.Time
}

// Issued is a certificate and its key, as PEM files and in memory.
type Issued struct {
	CertFile, KeyFile string
	Cert              *x509.Certificate
	TLS               tls.Certificate
}

// Issue makes a certificate with common name cn, signed by ca, and writes
// it and its key (mode 0600) into ca.Dir as cn.pem and cn-key.pem (a later
// Issue with the same cn replaces them: a rotation).
func (ca *CA) Issue(cn string, o Options) (*Issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	}
	if !o.Server && !o.Client {
		o.Server, o.Client = true, true
	}
	if len(o.Hosts) == 0 {
		o.Hosts = []string{"localhost", "127.0.0.1"}
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if o.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		for _, h := range o.Hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	if o.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	is := &Issued{
		CertFile: filepath.Join(ca.Dir, safe(cn)+".pem"),
		KeyFile:  filepath.Join(ca.Dir, safe(cn)+"-key.pem"),
		Cert:     cert,
		TLS:      pair,
	}
	// Written to a temporary name and renamed, as cert-manager and certbot
	// do, so a reader never sees half a file.
	if err := writeAtomic(is.KeyFile, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeAtomic(is.CertFile, certPEM, 0o644); err != nil {
		return nil, err
	}
	return is, nil
}

// MustIssue is Issue for a test: an error fails tb.
func (ca *CA) MustIssue(tb testing.TB, cn string, o Options) *Issued {
	tb.Helper()
	is, err := ca.Issue(cn, o)
	if err != nil {
		tb.Fatal(err)
	}
	return is
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func safe(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return fmt.Sprintf("cert%d", serial.Add(1))
	}
	return string(b)
}
