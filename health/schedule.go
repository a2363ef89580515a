package health

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/robfig/cron/v3"
)

// DefaultSchedule of CheckEngineHealth.
const DefaultSchedule = "@every 15s"

// cronParser reads five-field cron specs and descriptors (@every 15s,
// @hourly).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule is when CheckEngineHealth runs, parsed once. The zero Schedule
// runs no periodic check.
type Schedule struct {
	spec   string
	cron   cron.Schedule
	period time.Duration
}

// ParseSchedule parses spec: a schedule that fires, at most once a second.
func ParseSchedule(spec string) (Schedule, error) {
	if rest, ok := strings.CutPrefix(spec, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return Schedule{}, errors.New("@every wants a duration such as 15s")
		}
		if d < time.Second {
			return Schedule{}, fmt.Errorf("@every %s: the period must be at least 1s", d)
		}
	}
	c, err := cronParser.Parse(spec)
	if err != nil {
		// The parser quotes the spec, whole: a message says a part.
		return Schedule{}, errors.New(shorten(err.Error(), 200))
	}
	first := c.Next(time.Now())
	second := c.Next(first)
	if first.IsZero() || second.IsZero() {
		return Schedule{}, errors.New("never fires")
	}
	return Schedule{spec: spec, cron: c, period: second.Sub(first)}, nil
}

// String returns the spec.
func (s Schedule) String() string { return s.spec }

// IsZero reports whether s is the zero Schedule (no periodic check).
func (s Schedule) IsZero() bool { return s.cron == nil }

// Period is the time between two runs (for a cron spec, between the next
// two).
func (s Schedule) Period() time.Duration { return s.period }

// StuckAfter is how long an acting master may go without a successful
// pass before it counts as stuck: three periods, at least a minute.
func (s Schedule) StuckAfter() time.Duration { return max(3*s.period, time.Minute) }

// shorten cuts s to at most n bytes, at a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
