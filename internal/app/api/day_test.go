package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/audit"
	"github.com/enginehealth/enginehealth/nodes"
)

// TestBuildDay: the master's band has a segment per term, from each
// election to the next; a node that changed has a band of its statuses,
// walked back from its status now, with its grade changes marked; the
// others are counted by status; the minutes' counts become bars; past
// dayMaxBands, changed nodes are counted, the busiest drawn.
func TestBuildDay(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	at := func(h float64) time.Time { return now.Add(-dayWindow + time.Duration(h*float64(time.Hour))) }
	id := int64(0)
	ev := func(h float64, kind audit.Kind, node, from, to string, term int64) audit.Event {
		id++
		e := audit.Event{ID: id, At: at(h), Kind: kind, Node: audit.Str(node), Reason: string(kind)}
		if from != "" {
			e.FromState = audit.Str(from)
		}
		if to != "" {
			e.ToState = audit.Str(to)
		}
		if term > 0 {
			e.Term = &term
		}
		return e
	}
	changes := []audit.Event{
		ev(6, audit.KindMasterElected, "a", "", "", 4),
		ev(12, audit.KindNodeStatus, "b", "Ready", "Not responding", 0),
		ev(13, audit.KindNodeGrade, "b", "NORMAL", "WARNING", 0),
		ev(18, audit.KindMasterElected, "c", "", "", 5),
		ev(18, audit.KindNodeStatus, "b", "Not responding", "Ready", 0),
	}
	ns := []nodes.Node{{Name: "a", Status: nodes.StatusReady}, {Name: "b", Status: nodes.StatusReady}, {Name: "c", Status: nodes.StatusReady},
		{Name: "d", Status: nodes.StatusUnexpectedShutdown}}
	minute := func(m int) time.Time { return now.Add(-dayWindow + time.Duration(m)*time.Minute) }
	per := []audit.MinuteCount{{Minute: minute(0), Kind: audit.KindRepair, Count: 10}, {Minute: minute(720), Kind: audit.KindRepair, Count: 5},
		{Minute: minute(720), Kind: audit.KindRetried, Count: 2}, {Minute: minute(1439), Kind: audit.KindRetryScheduled, Count: 1},
		{Minute: minute(-1), Kind: audit.KindHeld, Count: 1}, {Minute: minute(30), Kind: audit.KindNodeStatus, Count: 9}}
	c := buildDay(now, ns, changes, false, per, nil)

	segs := func(b dayBand) string {
		var s []string
		for _, g := range b.Segs {
			s = append(s, fmt.Sprintf("%s@%.0f+%.0f", g.Class, g.X, g.W))
		}
		return strings.Join(s, " ")
	}
	if got := segs(c.Master); got != "m-before@0+250 m-0@250+500 m-1@750+250" || len(c.Master.Marks) != 2 {
		t.Errorf("master: %s, %d marks", got, len(c.Master.Marks))
	}
	if len(c.Bands) != 1 || c.Bands[0].Name != "b" || segs(c.Bands[0]) != "s-Ready@0+500 s-Not-responding@500+250 s-Ready@750+250" ||
		len(c.Bands[0].Marks) != 1 || c.Bands[0].Marks[0].Class != "grade" {
		t.Errorf("bands: %+v", c.Bands)
	}
	if fmt.Sprint(c.Groups) != "[{Ready 2} {Unexpected shutdown 1}]" {
		t.Errorf("groups %v", c.Groups)
	}
	if s := c.Series[0]; s.Name != "repairs" || s.Total != 15 || s.Max != 10 || strings.Count(s.Path, "M") != 2 {
		t.Errorf("repairs %+v", s)
	}
	if s := c.Series[1]; s.Name != "retries" || s.Total != 3 || s.Max != 2 {
		t.Errorf("retries %+v", s)
	}
	if s := c.Series[2]; s.Name != "holds" || s.Total != 1 || s.Max != 1 {
		t.Errorf("holds (one in the minute cut by the window's start) %+v", s)
	}
	if len(c.Listed) != 5 || c.Listed[0].ID != 5 || c.Linked != 5 {
		t.Errorf("listed %d of %d, first %d", len(c.Listed), c.Linked, c.Listed[0].ID)
	}

	// Many changed nodes: the busiest are drawn, the rest counted.
	changes = nil
	for i := range dayMaxBands + 40 {
		name := fmt.Sprintf("n%03d", i)
		for k := range 1 + i%3 {
			changes = append(changes, ev(float64(k+1), audit.KindNodeStatus, name, "Ready", "Ready", 0))
		}
	}
	c = buildDay(now, nil, changes, false, nil, nil)
	if len(c.Bands) != dayMaxBands || c.MoreChanged != 40 || c.Bands[0].Changes != 3 {
		t.Errorf("%d bands (first with %d changes), %d more", len(c.Bands), c.Bands[0].Changes, c.MoreChanged)
	}
	// Every span and mark drawn links to an event listed.
	listed := map[int64]bool{}
	for _, e := range c.Listed {
		listed[e.ID] = true
	}
	for _, b := range c.Bands {
		for _, sg := range b.Segs {
			if sg.Event != 0 && !listed[sg.Event] {
				t.Fatalf("band %s links to event %d, not listed", b.Name, sg.Event)
			}
		}
	}
	if c.Linked != len(c.Listed) || c.Linked >= len(changes) {
		t.Errorf("listed %d of %d linked (of %d changes)", len(c.Listed), c.Linked, len(changes))
	}
}
