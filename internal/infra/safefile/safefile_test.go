package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRead: a regular file within the limit is read; a FIFO (with no
// writer: a plain open would block for good), a character device that
// never ends, a directory, a file over the limit and a missing file are
// each refused at once, saying why.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 11), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(ok, 10); err != nil || string(b) != "abc" {
		t.Fatalf("a regular file: %q %v", b, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for path, want := range map[string]string{
			fifo:        "not a regular file (a FIFO)",
			"/dev/zero": "not a regular file (a character device)",
			dir:         "not a regular file (a directory)",
			big:         "11 bytes, more than the limit of 10",
		} {
			var e *Error
			if _, err := Read(path, 10); !errors.As(err, &e) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want %q", path, err, want)
			}
		}
		if _, err := Read(filepath.Join(dir, "missing"), 10); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a missing file: %v", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Read blocked on a FIFO or a device")
	}
}
