package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lmittmann/tint"
)

// TestJSONLogDurations: a duration in the JSON log is written as Go
// writes it ("216ms"), as in the text log, also inside a group; never as
// an integer of nanoseconds.
func TestJSONLogDurations(t *testing.T) {
	var buf bytes.Buffer
	log, _, err := newLogger("json", "info", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("retrying", "retry_in", 216*time.Millisecond, "count", 3)
	log.WithGroup("pass").Info("done", "took", 90*time.Second)
	dec := json.NewDecoder(&buf)
	var first struct {
		RetryIn any `json:"retry_in"`
		Count   any `json:"count"`
	}
	var second struct {
		Pass struct {
			Took any `json:"took"`
		} `json:"pass"`
	}
	if err := dec.Decode(&first); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&second); err != nil {
		t.Fatal(err)
	}
	if first.RetryIn != "216ms" || first.Count != float64(3) || second.Pass.Took != "1m30s" {
		t.Fatalf("retry_in %#v, count %#v, took %#v; want \"216ms\", 3, \"1m30s\"", first.RetryIn, first.Count, second.Pass.Took)
	}
}

// TestConsoleErrorsInRed: the packages log an error as slog.Any("err",
// err), knowing nothing of the console's handler; on a terminal tint
// writes it in red all the same, under its key, and nothing else in red.
func TestConsoleErrorsInRed(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(tint.NewTextHandler(&buf, &tint.Options{NoColor: false, ReplaceAttr: redErrors}))
	log.Warn("lost master office", slog.Any("err", errors.New("lease expired")), "term", 7)
	out := buf.String()
	red := ";91m" // tint's color 9 (high-intensity red)
	if !strings.Contains(out, red+"err=") || !strings.Contains(out, "lease expired") || strings.Count(out, "91m") != 1 {
		t.Fatalf("console line %q: want err=lease expired in red, and nothing else", out)
	}
}
