package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"
	"golang.org/x/term"
)

// newLogger builds the process logger: tint on a terminal (or format
// "text"), JSON otherwise (journald, files). A level it cannot parse is a
// usage error (the configuration's checks refuse it first). The returned
// LevelVar changes the level while the logger runs (a reload).
func newLogger(format, level string, w io.Writer) (*slog.Logger, *slog.LevelVar, error) {
	lv := new(slog.LevelVar)
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, nil, usageError{fmt.Errorf("log.level: %w", err)}
	}
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	if format == "text" || (format == "auto" && tty) {
		return slog.New(tint.NewTextHandler(w, &tint.Options{Level: lv, TimeFormat: time.TimeOnly + ".000", NoColor: !tty, ReplaceAttr: redErrors})), lv, nil
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv, ReplaceAttr: durationText})), lv, nil
}

// redErrors writes every error in red on the console: the packages log
// an error as slog.Any("err", err), not knowing the handler.
func redErrors(_ []string, a slog.Attr) slog.Attr {
	if _, ok := a.Value.Any().(error); ok && a.Value.Kind() == slog.KindAny {
		return tint.Attr(9, a) // 9: the red of tint.Err
	}
	return a
}

// durationText writes a duration as Go writes it ("216ms", "1m30s"), as
// the text format does, not as the JSON handler would (an integer of
// nanoseconds): one rule for every duration in the log.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
