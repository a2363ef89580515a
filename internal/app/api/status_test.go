package api

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/certexpiry"
	"github.com/enginehealth/enginehealth/nodes"
)

// TestStatusEtcd: GET /v1/status says whether the answering node reaches
// etcd (null when the node does not say), and the status page shows a
// node that does not as an error banner, with why.
func TestStatusEtcd(t *testing.T) {
	since := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	handler := func(etcd func() apitype.EtcdState) http.Handler {
		s := &store{}
		return NewHandler(Config{Self: "me", Nodes: s, Acker: s, Ops: s, Events: s.Events, Etcd: etcd,
			Ready: func() apitype.Ready {
				return apitype.Ready{Ready: true, Status: string(nodes.StatusReady), Grade: nodes.GradeNormal}
			},
			Local: func() (apitype.Leader, error) { return apitype.Leader{Name: "me", Term: 7}, nil },
			Log:   slog.New(slog.NewTextHandler(io.Discard, nil))})
	}
	field := func(h http.Handler) string {
		t.Helper()
		rec := do(h, "GET", "/v1/status", "", "")
		var st map[string]json.RawMessage
		var b bytes.Buffer
		if err := json.Unmarshal(rec.Body.Bytes(), &st); rec.Code != 200 || err != nil || json.Compact(&b, st["etcd"]) != nil {
			t.Fatalf("GET /v1/status: %d %v %s", rec.Code, err, rec.Body)
		}
		return b.String()
	}
	down := apitype.EtcdState{Error: "etcd at https://e1:2379: its certificate is not trusted", Since: since, CheckedAt: since.Add(time.Minute)}
	h := handler(func() apitype.EtcdState { return down })
	if got, want := field(h), `{"reachable":false,"error":"etcd at https://e1:2379: its certificate is not trusted","since":"2026-11-24T10:00:00Z","checked_at":"2026-11-24T10:01:00Z"}`; got != want {
		t.Fatalf("etcd\n%s\nwant\n%s", got, want)
	}
	page := do(h, "GET", "/", "", "").Body.String()
	if want := `<div class="banner bad" id="banner-etcd">me cannot reach etcd <span>since 2026-11-24 10:00:00Z: etcd at https://e1:2379: its certificate is not trusted`; !strings.Contains(page, want) || !strings.Contains(page, "<title>⚠") {
		t.Errorf("the status page lacks %q:\n%s", want, page)
	}
	h = handler(func() apitype.EtcdState { return apitype.EtcdState{Reachable: true, Since: since, CheckedAt: since} })
	if got := field(h); !strings.HasPrefix(got, `{"reachable":true,"error":null,`) {
		t.Fatalf("reachable: %s", got)
	}
	if page := do(h, "GET", "/", "", "").Body.String(); strings.Contains(page, "banner-etcd") {
		t.Fatal("an etcd banner for a node that reaches etcd")
	}
	if got := field(handler(nil)); got != "null" {
		t.Fatalf("a node that does not say: %s, want null", got)
	}
}

// TestStatusCertificates: GET /v1/status lists the node's watched
// certificate files with when each expires, those within 7 days (or
// expired) marked expiring_soon; the status page shows those as banners
// (a warning, an error once expired). Without any, the list is empty,
// never null, and no banner is shown.
func TestStatusCertificates(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	cert := func(cn string, left time.Duration) []*x509.Certificate {
		return []*x509.Certificate{{Subject: pkix.Name{CommonName: cn}, NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(left), Raw: []byte(cn)}}
	}
	w := certexpiry.New(certexpiry.Options{Now: func() time.Time { return now }})
	w.Add("etcd.tls.cert_file", certexpiry.Chain, certexpiry.Fixed(cert("sidecar", 3*24*time.Hour)))
	w.Add("etcd.tls.ca_file", certexpiry.Roots, certexpiry.Fixed(cert("etcd-ca", 3650*24*time.Hour)))
	w.Add("api.tls.cert_file", certexpiry.Chain, certexpiry.Fixed(cert("", -time.Hour)))
	handler := func(certs func() []certexpiry.Expiry) http.Handler {
		s := &store{}
		return NewHandler(Config{Self: "me", Nodes: s, Acker: s, Ops: s, Events: s.Events, Certificates: certs,
			Ready: func() apitype.Ready {
				return apitype.Ready{Ready: true, Status: string(nodes.StatusReady), Grade: nodes.GradeNormal}
			},
			Local: func() (apitype.Leader, error) { return apitype.Leader{Name: "me", Term: 7}, nil },
			Log:   slog.New(slog.NewTextHandler(io.Discard, nil))})
	}
	// certificates returns the field of GET /v1/status, compact.
	certificates := func(h http.Handler) string {
		t.Helper()
		rec := do(h, "GET", "/v1/status", "", "")
		var st map[string]json.RawMessage
		var b bytes.Buffer
		if err := json.Unmarshal(rec.Body.Bytes(), &st); rec.Code != 200 || err != nil || json.Compact(&b, st["certificates"]) != nil {
			t.Fatalf("GET /v1/status: %d %v %s", rec.Code, err, rec.Body)
		}
		return b.String()
	}

	h := handler(w.Expiries)
	want := `[{"which":"etcd.tls.cert_file","cn":"sidecar","not_after":"2026-11-27T10:00:00Z","expires_in_seconds":259200,"expiring_soon":true},` +
		`{"which":"etcd.tls.ca_file","cn":"etcd-ca","not_after":"2036-11-21T10:00:00Z","expires_in_seconds":315360000,"expiring_soon":false},` +
		`{"which":"api.tls.cert_file","cn":null,"not_after":"2026-11-24T09:00:00Z","expires_in_seconds":-3600,"expiring_soon":true}]`
	if got := certificates(h); got != want {
		t.Fatalf("certificates\n%s\nwant\n%s", got, want)
	}
	page := do(h, "GET", "/", "", "").Body.String()
	for _, want := range []string{
		"<title>⚠ ",
		`<div class="banner warn" id="banner-certificate-etcd.tls.cert_file">Certificate expires soon <span>— etcd.tls.cert_file (CN sidecar) expires on 2026-11-27 10:00:00Z, in 3 days: renew it.`,
		`<div class="banner bad" id="banner-certificate-api.tls.cert_file">Certificate expired <span>— api.tls.cert_file expired on 2026-11-24 09:00:00Z`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the status page lacks %q", want)
		}
	}
	if strings.Contains(page, "banner-certificate-etcd.tls.ca_file") {
		t.Error("a banner for a CA that expires in 10 years")
	}

	h = handler(nil)
	if got := certificates(h); got != "[]" {
		t.Fatalf("no certificates: %s, want []", got)
	}
	if page := do(h, "GET", "/", "", "").Body.String(); strings.Contains(page, "banner-certificate") || strings.Contains(page, "<title>⚠") {
		t.Fatal("a certificate banner without certificates")
	}
}
