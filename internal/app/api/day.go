package api

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/nodes"
)

// The console's day (GET /console/day): the last 24 hours drawn, on the
// server, as SVG: a band for the master (terms, with their changes
// marked), a band for each node whose status changed (its statuses, its
// grade changes marked), the nodes that did not change counted by
// status, and below them the repairs, retries, holds and failures of
// each minute. Every segment and mark links to its event in the list
// under the chart (a tap goes there; a hover shows its title). At any
// number of nodes the chart holds at most dayMaxBands node bands.

const (
	dayWindow = 24 * time.Hour
	// dayWidth is the chart's width in SVG units (it is drawn to the
	// page's width).
	dayWidth = 1000.0
	// dayMaxChanges bounds the changes read for a day.
	dayMaxChanges = 20000
	// dayMaxBands bounds the nodes drawn with a band of their own (those
	// that changed most); more changed nodes are counted.
	dayMaxBands = 60
	// dayListed bounds the changes listed under the chart: those the
	// drawn spans and marks link to, newest first.
	dayListed = 2000
)

// daySeg is a span of a band: from X, W wide (SVG units), in a class,
// with a title; Event is the event that began it (0: none in the day).
type daySeg struct {
	X, W  float64
	Class string
	Title string
	Event int64
}

// dayMark is a change at X (a term, a grade).
type dayMark struct {
	X     float64
	Class string
	Title string
	Event int64
}

type dayBand struct {
	Name    string
	Changes int
	Segs    []daySeg
	Marks   []dayMark
}

// dayGroup counts the nodes that kept one status all day.
type dayGroup struct {
	Status string
	Count  int
}

// daySeries is one kind of activity per minute: its bars as an SVG path
// (Height units high at its busiest minute).
type daySeries struct {
	Name, Class string
	Path        string
	Max, Total  int64
}

// dayChart is what the day page draws.
type dayChart struct {
	From, To    time.Time
	Master      dayBand
	Bands       []dayBand
	Groups      []dayGroup
	MoreChanged int
	Series      []daySeries
	// Listed are the changes the chart links to, newest first (at most
	// dayListed, of Linked); Truncated: the day had more than
	// dayMaxChanges (the first are drawn).
	Listed    []apitype.Event
	Linked    int
	Changes   int
	Truncated bool
	Nodes     int
	Hours     []string
}

// x is t's place on the chart.
func (c *dayChart) x(t time.Time) float64 {
	f := float64(t.Sub(c.From)) / float64(c.To.Sub(c.From))
	return dayWidth * min(max(f, 0), 1)
}

// minSpan is the narrowest segment drawn (SVG units): a minute's
// outage stays visible in a day.
const minSpan = 1.5

// span returns the segment from a to b.
func (c *dayChart) span(a, b time.Time, class, title string, ev int64) daySeg {
	x := c.x(a)
	w := max(c.x(b)-x, minSpan)
	return daySeg{X: min(x, dayWidth-w), W: w, Class: class, Title: title, Event: ev}
}

// statusClass is a node status's CSS class ("Not responding" →
// "s-Not-responding"; "" → "s-gone": no record).
func statusClass(s string) string {
	if s == "" {
		return "s-gone"
	}
	return "s-" + strings.ReplaceAll(s, " ", "-")
}

func stamp(t time.Time) string { return t.UTC().Format("15:04:05Z") }

// buildDay draws the day from now's node records, the day's changes
// (oldest first) and its counts per minute. l is the acting master now
// (nil: none).
func buildDay(now time.Time, ns []nodes.Node, changes []audit.Event, truncated bool, perMinute []audit.MinuteCount, l *apitype.Leader) dayChart {
	c := dayChart{From: now.Add(-dayWindow), To: now, Nodes: len(ns), Changes: len(changes), Truncated: truncated}
	for h := 24; h >= 0; h -= 3 {
		if h == 0 {
			c.Hours = append(c.Hours, "now")
		} else {
			c.Hours = append(c.Hours, fmt.Sprintf("−%dh", h))
		}
	}

	// The master: a segment per term, from its election to the next or
	// to its loss.
	c.Master.Name = "master"
	at, term, holder, ev := c.From, int64(0), "", int64(0)
	closeTerm := func(end time.Time) {
		class, title := "m-none", "no master known"
		switch {
		case holder != "" && term > 0:
			class, title = fmt.Sprintf("m-%d", term%2), fmt.Sprintf("term %d: %s", term, holder)
		case holder == "" && ev == 0 && len(c.Master.Segs) == 0:
			class, title = "m-before", "before the day's first change of master"
		}
		if end.After(at) {
			c.Master.Segs = append(c.Master.Segs, c.span(at, end, class, title, ev))
		}
	}
	byNode := map[string][]audit.Event{}
	for _, e := range changes {
		switch e.Kind {
		case audit.KindMasterElected:
			closeTerm(e.At)
			at, holder, ev = e.At, deref(e.Node), e.ID
			if e.Term != nil {
				term = *e.Term
			}
			c.Master.Marks = append(c.Master.Marks, dayMark{X: c.x(e.At), Class: "term", Title: stamp(e.At) + " " + e.Reason + " (" + holder + ")", Event: e.ID})
			c.Master.Changes++
		case audit.KindMasterLost:
			closeTerm(e.At)
			at, holder, term, ev = e.At, "", 0, e.ID
			c.Master.Marks = append(c.Master.Marks, dayMark{X: c.x(e.At), Class: "lost", Title: stamp(e.At) + " master lost: " + e.Reason, Event: e.ID})
			c.Master.Changes++
		default:
			if e.Node != nil {
				byNode[*e.Node] = append(byNode[*e.Node], e)
			}
		}
	}
	if l != nil && holder == "" && term == 0 && len(c.Master.Marks) == 0 {
		holder, term = l.Name, l.Term
	}
	closeTerm(now)

	// The nodes: a band for each that changed, walked back from its
	// status now; the others counted by status.
	current := map[string]string{}
	for _, n := range ns {
		current[n.Name] = string(n.Status)
	}
	groups := map[string]int{}
	for _, n := range ns {
		if len(byNode[n.Name]) == 0 {
			groups[string(n.Status)]++
		}
	}
	for name, es := range byNode {
		b := dayBand{Name: name}
		// The status before each change is its from_state; a node with
		// no record now ended in "" (forgotten or deregistered).
		status := ""
		for _, e := range es {
			if e.Kind == audit.KindNodeStatus || e.Kind == audit.KindNodeRegistered {
				status = deref(e.FromState)
				break
			}
		}
		from, ev := c.From, int64(0)
		for _, e := range es {
			switch e.Kind {
			case audit.KindNodeGrade:
				b.Marks = append(b.Marks, dayMark{X: c.x(e.At), Class: "grade", Event: e.ID,
					Title: fmt.Sprintf("%s grade %s → %s: %s", stamp(e.At), deref(e.FromState), deref(e.ToState), e.Reason)})
				b.Changes++
				continue
			case audit.KindNodeDeregistered, audit.KindNodeForgotten:
				b.Segs = append(b.Segs, c.span(from, e.At, statusClass(status), cmp.Or(status, "no record"), ev))
				from, status, ev = e.At, "", e.ID
			default: // registered, status
				next := deref(e.ToState)
				b.Segs = append(b.Segs, c.span(from, e.At, statusClass(status), cmp.Or(status, "no record"), ev))
				from, status, ev = e.At, next, e.ID
			}
			b.Changes++
		}
		if s, ok := current[name]; ok {
			status = s
		}
		b.Segs = append(b.Segs, c.span(from, now, statusClass(status), cmp.Or(status, "no record"), ev))
		for i := range b.Segs {
			b.Segs[i].Title = b.Name + ": " + b.Segs[i].Title
		}
		c.Bands = append(c.Bands, b)
	}
	slices.SortFunc(c.Bands, func(a, b dayBand) int { return cmp.Or(cmp.Compare(b.Changes, a.Changes), cmp.Compare(a.Name, b.Name)) })
	if len(c.Bands) > dayMaxBands {
		c.MoreChanged = len(c.Bands) - dayMaxBands
		c.Bands = c.Bands[:dayMaxBands]
	}
	for _, s := range []nodes.Status{nodes.StatusReady, nodes.StatusRecovering, nodes.StatusUnexpectedShutdown, nodes.StatusNotResponding} {
		if n := groups[string(s)]; n > 0 {
			c.Groups = append(c.Groups, dayGroup{Status: string(s), Count: n})
		}
	}

	// Activity per minute.
	series := []struct {
		name, class string
		kinds       []audit.Kind
	}{
		{"repairs", "a-repair", []audit.Kind{audit.KindRepair}},
		{"retries", "a-retry", []audit.Kind{audit.KindRetried, audit.KindRetryScheduled, audit.KindManualRetry}},
		{"holds", "a-hold", []audit.Kind{audit.KindHeld, audit.KindHoldDecided}},
		{"failures", "a-fail", []audit.Kind{audit.KindFailed}},
	}
	const minutes, height = 24 * 60, 40.0
	for _, sr := range series {
		per := map[int]int64{}
		s := daySeries{Name: sr.name, Class: sr.class}
		for _, m := range perMinute {
			i := min(max(int(m.Minute.Sub(c.From)/time.Minute), 0), minutes-1)
			if slices.Contains(sr.kinds, m.Kind) {
				per[i] += m.Count
				s.Total += m.Count
			}
		}
		for _, n := range per {
			s.Max = max(s.Max, n)
		}
		var p strings.Builder
		w := dayWidth / minutes
		for m := range minutes {
			if n := per[m]; n > 0 {
				h := max(height*float64(n)/float64(s.Max), 1)
				fmt.Fprintf(&p, "M%.2f %.0fV%.2fh%.3fV%.0fZ", float64(m)*w, height, height-h, w, height)
			}
		}
		s.Path = p.String()
		c.Series = append(c.Series, s)
	}

	// The list under the chart: the events its spans and marks link to
	// (the master's, the drawn nodes'), newest first.
	linked := map[int64]bool{}
	for _, b := range append([]dayBand{c.Master}, c.Bands...) {
		for _, sg := range b.Segs {
			if sg.Event != 0 {
				linked[sg.Event] = true
			}
		}
		for _, m := range b.Marks {
			linked[m.Event] = true
		}
	}
	c.Linked = len(linked)
	for i := len(changes) - 1; i >= 0 && len(c.Listed) < dayListed; i-- {
		if linked[changes[i].ID] {
			c.Listed = append(c.Listed, wireEvent(changes[i]))
		}
	}
	return c
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// dayPage serves GET /console/day.
func (h *handler) dayPage(w http.ResponseWriter, r *http.Request, d consoleData) {
	d.Page, d.Title = "day", "the last day"
	if h.cfg.Changes == nil || h.cfg.PerMinute == nil {
		h.consoleProblem(w, r, http.StatusNotFound, d.Who, "This daemon does not read the audit trail's day.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	now := h.cfg.Clock()
	since := now.Add(-dayWindow)
	ns, err := h.cfg.Nodes.List(ctx)
	if err != nil {
		h.consoleInternal(w, r, d.Who, err)
		return
	}
	changes, err := h.cfg.Changes(ctx, since, dayMaxChanges+1)
	if err != nil {
		h.consoleInternal(w, r, d.Who, err)
		return
	}
	truncated := len(changes) > dayMaxChanges
	if truncated {
		changes = changes[:dayMaxChanges]
	}
	counts, err := h.cfg.PerMinute(ctx, since)
	if err != nil {
		h.consoleInternal(w, r, d.Who, err)
		return
	}
	var l *apitype.Leader
	if h.cfg.Local != nil {
		if own, err := h.cfg.Local(); err == nil {
			l = &own
		}
	}
	day := buildDay(now, ns, changes, truncated, counts, l)
	d.Day = &day
	h.renderConsole(w, r, http.StatusOK, d)
}
