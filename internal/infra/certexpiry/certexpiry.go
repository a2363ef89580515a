// Package certexpiry watches when the certificates the daemon uses
// expire. Each watched file is named by the key path of its setting
// ("etcd.tls.cert_file") and read through a function that returns its
// certificates as the daemon uses them now, so a reload that swaps one
// shows at once. A Watch answers, at any time, how long each file has
// left (the metric and the status read it), and logs a file that expires
// within Soon: at start, once a day while it does, and whenever its
// certificate changes.
//
// What "the file expires" means depends on its Kind. A Chain (a
// certificate and its intermediates) stops working when the first of its
// certificates expires: its expiry is the earliest NotAfter of them all.
// A Roots file (a CA bundle) holds CAs each trusted on its own, and an
// expired CA beside a valid one is a bundle mid-rotation (tlsfiles
// accepts it): its expiry is the earliest NotAfter among the CAs valid
// now, so that a CA still in use that expires soon is said, and a leftover
// expired one is not; with none valid now, the latest NotAfter of them
// (when the file stopped verifying anything: the value is negative).
package certexpiry

import (
	"context"
	"crypto/x509"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"
)

// Soon is the time left under which a certificate expires soon (a warning in the
// log, in the status, and an alert).
const Soon = 7 * 24 * time.Hour

// Defaults of Options.
const (
	DefaultPeriod = 24 * time.Hour
	DefaultPoll   = time.Minute
)

// Kind says how a file's certificates expire (see the package comment).
type Kind int

const (
	// Chain is a certificate, leaf first, with its intermediates.
	Chain Kind = iota
	// Roots are CA certificates, each trusted on its own.
	Roots
)

// Expiry is when one watched file expires, as seen at one time.
type Expiry struct {
	// Which is the key path of the file's setting.
	Which string
	// CN is the subject common name of the certificate that decides.
	CN string
	// NotAfter is that certificate's NotAfter.
	NotAfter time.Time
	// Left is the time until NotAfter: negative once expired.
	Left time.Duration

	// certs holds the file's certificates, as read.
	certs []*x509.Certificate
}

// Soon reports whether the file expires within Soon, or has expired.
func (e Expiry) Soon() bool { return e.Left < Soon }

// Expired reports whether the file has expired.
func (e Expiry) Expired() bool { return e.Left < 0 }

// DaysLeft is Left in days, to a tenth (negative once expired).
func (e Expiry) DaysLeft() float64 {
	d := math.Round(e.Left.Hours()/24*10) / 10
	if d == 0 {
		return 0 // never -0
	}
	return d
}

// Options of a Watch.
type Options struct {
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Period between two warnings of a file that still expires soon;
	// default DefaultPeriod.
	Period time.Duration
	// Poll is how often Run looks at the files (a change is logged within
	// it); default DefaultPoll.
	Poll time.Duration
}

// Watch is the registry of the watched files.
type Watch struct {
	o Options

	mu    sync.Mutex
	files []file
	// logged holds, per file, what the last Check saw and when it last warned.
	logged map[string]logged
}

type file struct {
	which string
	kind  Kind
	certs func() []*x509.Certificate
}

type logged struct {
	certs  []*x509.Certificate
	level  slog.Level
	warned time.Time // zero: not warned of
}

// New returns an empty Watch.
func New(o Options) *Watch {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Period <= 0 {
		o.Period = DefaultPeriod
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	return &Watch{o: o, logged: map[string]logged{}}
}

// Add watches the file of key path which, whose certificates certs
// returns as the daemon uses them at each call (nil or none: the file is
// left out, e.g. a holder not filled yet).
func (w *Watch) Add(which string, kind Kind, certs func() []*x509.Certificate) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.files = append(w.files, file{which, kind, certs})
}

// Fixed returns certs, for a file the daemon reads once.
func Fixed(certs []*x509.Certificate) func() []*x509.Certificate {
	return func() []*x509.Certificate { return certs }
}

// Expiries returns when each watched file expires, now, in the order
// they were added.
func (w *Watch) Expiries() []Expiry {
	w.mu.Lock()
	files := w.files
	w.mu.Unlock()
	now := w.o.Now()
	out := make([]Expiry, 0, len(files))
	for _, f := range files {
		certs := f.certs()
		c := deciding(f.kind, certs, now)
		if c == nil {
			continue
		}
		out = append(out, Expiry{Which: f.which, CN: c.Subject.CommonName, NotAfter: c.NotAfter, Left: c.NotAfter.Sub(now), certs: certs})
	}
	return out
}

// deciding returns the certificate whose NotAfter is the file's expiry
// (nil for no certificate).
func deciding(kind Kind, certs []*x509.Certificate, now time.Time) *x509.Certificate {
	var first, last, firstValid *x509.Certificate
	for _, c := range certs {
		if c == nil {
			continue
		}
		if first == nil || c.NotAfter.Before(first.NotAfter) {
			first = c
		}
		if last == nil || c.NotAfter.After(last.NotAfter) {
			last = c
		}
		if !now.Before(c.NotBefore) && !now.After(c.NotAfter) && (firstValid == nil || c.NotAfter.Before(firstValid.NotAfter)) {
			firstValid = c
		}
	}
	switch {
	case kind == Chain:
		return first
	case firstValid != nil:
		return firstValid
	}
	return last
}

// Check logs each file that expires soon: a warning ("certificate
// expires soon"), an error once expired ("certificate expired"), when it
// was not warned of yet, when its certificates changed, when it went from
// one to the other, and again every Period while it lasts. A file whose
// certificates changed is logged at info ("certificate changed")
// whatever its expiry. Run calls
// it every Poll; call it once at start to say it before anything else.
func (w *Watch) Check(ctx context.Context, log *slog.Logger) {
	es := w.Expiries()
	now := w.o.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range es {
		prev, seen := w.logged[e.Which]
		changed := seen && !slices.EqualFunc(prev.certs, e.certs, (*x509.Certificate).Equal)
		attrs := []any{"which", e.Which, "not_after", e.NotAfter.UTC(), "cn", e.CN, "days_left", e.DaysLeft()}
		if changed {
			log.InfoContext(ctx, "certificate changed", attrs...)
		}
		cur := logged{certs: e.certs, level: slog.LevelInfo, warned: prev.warned}
		switch {
		case e.Expired():
			cur.level = slog.LevelError
		case e.Soon():
			cur.level = slog.LevelWarn
		}
		due := !seen || changed || cur.level != prev.level || now.Sub(prev.warned) >= w.o.Period
		if cur.level > slog.LevelInfo && due {
			msg := "certificate expires soon"
			if e.Expired() {
				msg = "certificate expired"
			}
			log.Log(ctx, cur.level, msg, attrs...)
			cur.warned = now
		}
		w.logged[e.Which] = cur
	}
}

// Run calls Check at once and every Poll until ctx ends.
func (w *Watch) Run(ctx context.Context, log *slog.Logger) error {
	w.Check(ctx, log)
	t := time.NewTicker(w.o.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.Check(ctx, log)
		}
	}
}
