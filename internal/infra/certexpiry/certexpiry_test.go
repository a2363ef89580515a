package certexpiry

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/tlsfiles"
	"github.com/enginehealth/enginehealth/internal/testkit"
	"github.com/enginehealth/enginehealth/internal/testkit/testca"
)

func TestMain(m *testing.M) { testkit.Main(m, nil) }

const day = 24 * time.Hour

// records is a slog.Handler that keeps what is logged.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}

// take returns what was logged since the last take, as level, message
// and attributes.
func (r *records) take() []entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []entry
	for _, rec := range r.recs {
		l := entry{level: rec.Level, msg: rec.Message, attrs: map[string]any{}}
		rec.Attrs(func(a slog.Attr) bool {
			l.attrs[a.Key] = a.Value.Any()
			return true
		})
		out = append(out, l)
	}
	r.recs = nil
	return out
}

type entry struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

// clock is a settable clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// fixture is a Watch of one client certificate, etcd.tls.cert_file, in
// a holder as the daemon holds it, on a settable clock, logging to rec.
type fixture struct {
	ca  *testca.CA
	clk *clock
	h   *tlsfiles.Cert
	w   *Watch
	rec *records
	log *slog.Logger
}

// newFixture watches a certificate of cn that expires left from now.
func newFixture(t *testing.T, cn string, left time.Duration) *fixture {
	t.Helper()
	ca, err := testca.New(t.TempDir(), "watch-ca")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ca: ca, clk: &clock{time.Now()}, h: &tlsfiles.Cert{}, rec: &records{}}
	f.log = slog.New(f.rec)
	f.hold(t, cn, left)
	f.w = f.watch()
	return f
}

// watch returns a new Watch of the holder.
func (f *fixture) watch() *Watch {
	w := New(Options{Now: f.clk.now})
	w.Add("etcd.tls.cert_file", Chain, f.h.Chain)
	return w
}

// hold issues a client certificate of cn that expires left from the
// clock's now and puts it in the holder (a reload's swap).
func (f *fixture) hold(t *testing.T, cn string, left time.Duration) {
	t.Helper()
	is, err := f.ca.Issue(cn, testca.Options{Client: true, NotAfter: f.clk.t.Add(left)})
	if err != nil {
		t.Fatal(err)
	}
	f.h.Store(&is.TLS)
}

// check runs a Check and returns what it logged.
func (f *fixture) check() []entry {
	f.w.Check(context.Background(), f.log)
	return f.rec.take()
}

func near(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if math.Abs((got - want).Seconds()) > 60 {
		t.Fatalf("%s: %s, want about %s", what, got, want)
	}
}

// TestExpiringSoon: a client certificate that expires in 3 days is a
// warning at the first check, with its key path, NotAfter, CN and days
// left, and again a day later, not in between; its time left is about 3
// days. Swapped for a fresh one, the time left follows at once, and the
// change is logged without a warning.
func TestExpiringSoon(t *testing.T) {
	f := newFixture(t, "sidecar", 3*day)
	es := f.w.Expiries()
	if len(es) != 1 || es[0].Which != "etcd.tls.cert_file" || es[0].CN != "sidecar" || !es[0].Soon() || es[0].Expired() {
		t.Fatalf("expiries %+v", es)
	}
	near(t, "time left", es[0].Left, 3*day)

	got := f.check()
	if len(got) != 1 || got[0].level != slog.LevelWarn || got[0].msg != "certificate expires soon" {
		t.Fatalf("first check logged %+v, want one warning", got)
	}
	a := got[0].attrs
	if a["which"] != "etcd.tls.cert_file" || a["cn"] != "sidecar" || a["days_left"] != 3.0 ||
		!a["not_after"].(time.Time).Equal(es[0].NotAfter) {
		t.Fatalf("warning's attributes %v", a)
	}

	f.clk.advance(23 * time.Hour)
	if got := f.check(); len(got) != 0 {
		t.Fatalf("a second warning within the day: %+v", got)
	}
	f.clk.advance(time.Hour)
	if got := f.check(); len(got) != 1 || got[0].level != slog.LevelWarn || got[0].attrs["days_left"] != 2.0 {
		t.Fatalf("a day later: %+v, want one warning with 2 days left", got)
	}

	// Renewed: the holder is swapped, as a reload does.
	f.hold(t, "sidecar-renewed", 365*day)
	es = f.w.Expiries()
	if len(es) != 1 || es[0].CN != "sidecar-renewed" || es[0].Soon() {
		t.Fatalf("after the swap: %+v", es)
	}
	near(t, "time left after the swap", es[0].Left, 365*day)
	if got := f.check(); len(got) != 1 || got[0].level != slog.LevelInfo || got[0].msg != "certificate changed" || got[0].attrs["cn"] != "sidecar-renewed" {
		t.Fatalf("after the swap logged %+v, want the change at info", got)
	}
	f.clk.advance(2 * day)
	if got := f.check(); len(got) != 0 {
		t.Fatalf("a fresh certificate logged %+v", got)
	}
}

// TestExpired: a certificate past its NotAfter has a negative time left
// and is an error record; one that expires soon is a warning, then, once
// it has expired, an error at once (not a day after the warning).
func TestExpired(t *testing.T) {
	f := newFixture(t, "short", 12*time.Hour)
	if got := f.check(); len(got) != 1 || got[0].level != slog.LevelWarn {
		t.Fatalf("12 h left: %+v, want a warning", got)
	}
	f.clk.advance(13 * time.Hour)
	es := f.w.Expiries()
	if len(es) != 1 || !es[0].Expired() || !es[0].Soon() {
		t.Fatalf("expiries %+v", es)
	}
	near(t, "time left", es[0].Left, -time.Hour)
	if got := f.check(); len(got) != 1 || got[0].level != slog.LevelError || got[0].msg != "certificate expired" || got[0].attrs["days_left"] != 0.0 {
		t.Fatalf("expired: %+v, want an error record", got)
	}
	// Run checks at once (and then every Poll) until its context ends.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.watch().Run(ctx, f.log); err != nil {
		t.Fatal(err)
	}
	if got := f.rec.take(); len(got) != 1 || got[0].level != slog.LevelError {
		t.Fatalf("Run's first check: %+v", got)
	}
}

// TestKinds: a chain expires with its first certificate; a CA bundle with
// the first CA valid now (an expired one beside it is a rotation's
// leftover), or, with none valid, when the last stopped being; a file
// without certificates is left out.
func TestKinds(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	cert := func(cn string, notAfter time.Duration) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, NotBefore: now.Add(-400 * day), NotAfter: now.Add(notAfter), Raw: []byte(cn)}
	}
	old, soon, fresh, older := cert("old", -day), cert("soon", 5*day), cert("fresh", 3650*day), cert("older", -3*day)
	w := New(Options{Now: func() time.Time { return now }})
	w.Add("a.ca_file", Roots, Fixed([]*x509.Certificate{old, fresh, soon}))
	w.Add("b.ca_file", Roots, Fixed([]*x509.Certificate{older, old}))
	w.Add("c.cert_file", Chain, Fixed([]*x509.Certificate{fresh, soon, old}))
	w.Add("d.cert_file", Chain, (&tlsfiles.Cert{}).Chain)
	want := []struct {
		which, cn string
		left      time.Duration
	}{{"a.ca_file", "soon", 5 * day}, {"b.ca_file", "old", -day}, {"c.cert_file", "old", -day}}
	es := w.Expiries()
	if len(es) != len(want) {
		t.Fatalf("expiries %+v, want %v", es, want)
	}
	for i, e := range es {
		if e.Which != want[i].which || e.CN != want[i].cn || e.Left != want[i].left || !e.NotAfter.Equal(now.Add(want[i].left)) {
			t.Errorf("%s: %s, %s left; want %s, %s", e.Which, e.CN, e.Left, want[i].cn, want[i].left)
		}
	}
}
