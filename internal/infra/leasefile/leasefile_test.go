package leasefile

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func record() Record {
	return Record{Lease: 0x694d7a1b2c3d4e5f, Prefix: "/enginehealth/", Endpoints: []string{"10.0.0.1:2379", "10.0.0.2:2379"},
		Node: "node-a", Incarnation: "7f3a", Process: Process{PID: 4242, StartTime: 987654}, WrittenAt: time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)}
}

// TestWriteRead: a record written is read back whole, in a file of mode
// 0600 (whatever the umask), with the lease in hex; writing again
// replaces it and leaves no temporary file; a missing directory is made.
func TestWriteRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	want := record()
	if err := Write(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	want.Version = version
	if err != nil || got.Lease != want.Lease || got.Prefix != want.Prefix || got.Process != want.Process ||
		strings.Join(got.Endpoints, ",") != strings.Join(want.Endpoints, ",") || got.Node != want.Node || !got.WrittenAt.Equal(want.WrittenAt) {
		t.Fatalf("read %+v %v, want %+v", got, err, want)
	}
	st, err := os.Stat(Path(dir))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v, want mode 0600", st.Mode(), err)
	}
	data, _ := os.ReadFile(Path(dir))
	if !strings.Contains(string(data), `"lease":"694d7a1b2c3d4e5f"`) {
		t.Fatalf("the lease is not in hex: %s", data)
	}
	want.Lease = 0x1234
	if err := Write(dir, want); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(dir); err != nil || got.Lease != 0x1234 {
		t.Fatalf("after a second write: %+v %v", got, err)
	}
	es, _ := os.ReadDir(dir)
	if len(es) != 1 || es[0].Name() != Name {
		t.Fatalf("the directory holds %v, want %s alone", es, Name)
	}
}

// TestReadRefuses: a missing file is fs.ErrNotExist; a corrupt, truncated,
// oversized, empty-lease or unknown-version file, a directory and a FIFO
// in its place are each an *Error saying why, read at once (never
// blocking on the FIFO).
func TestReadRefuses(t *testing.T) {
	if _, err := Read(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no file: %v, want fs.ErrNotExist", err)
	}
	for name, c := range map[string]struct {
		content string
		want    string
	}{
		"corrupt":    {"{not json", "not a lease record"},
		"truncated":  {`{"version":1,"lease":"12`, "not a lease record"},
		"trailing":   {`{"version":1,"lease":"12","process":{"pid":1,"start_time":2}} {}`, "not a lease record"},
		"bad lease":  {`{"version":1,"lease":"SECRETxyz","process":{"pid":1,"start_time":2}}`, "a field's value is invalid"},
		"no lease":   {`{"version":1,"process":{"pid":1,"start_time":2}}`, "no lease"},
		"no process": {`{"version":1,"lease":"12"}`, "no valid process"},
		"version":    {`{"version":2,"lease":"12","process":{"pid":1,"start_time":2}}`, "format version 2"},
		"oversized":  {strings.Repeat(" ", MaxBytes+1), "more than the limit"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(Path(dir), []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
			var e *Error
			if _, err := Read(dir); !errors.As(err, &e) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("%v, want an *Error with %q (and no content of the file)", err, c.want)
			}
		})
	}
	// A file another could have written: a link (to another node's file,
	// or any), or one others may write, or in a directory others may.
	good := t.TempDir()
	if err := Write(good, Record{Lease: 0x12, Process: Process{PID: 1, StartTime: 2}}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		setup func(dir string) error
		want  string
	}{
		"symlink":         {func(dir string) error { return os.Symlink(Path(good), Path(dir)) }, "symbolic link"},
		"writable file":   {func(dir string) error { return os.WriteFile(Path(dir), []byte("{}"), 0o666) }, "writable by others"},
		"writable folder": {func(dir string) error { return os.Chmod(dir, 0o1777) }, "writable by others"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := c.setup(dir); err != nil {
				t.Fatal(err)
			}
			_ = os.Chmod(Path(dir), 0o666) // WriteFile's mode is masked by the umask
			var e *Error
			if _, err := Read(dir); !errors.As(err, &e) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want an *Error with %q", err, c.want)
			}
		})
	}
	dir := t.TempDir()
	if err := os.Mkdir(Path(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	var e *Error
	if _, err := Read(dir); !errors.As(err, &e) || !strings.Contains(err.Error(), "a directory") {
		t.Fatalf("a directory: %v", err)
	}
	dir = t.TempDir()
	if err := syscall.Mkfifo(Path(dir), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir); !errors.As(err, &e) || !strings.Contains(err.Error(), "a FIFO") {
		t.Fatalf("a FIFO: %v", err)
	}
}

// TestRemoveFor: the file is removed for the process that wrote it, and
// left for another (two daemons given one directory, or a daemon started
// again meanwhile); Remove of a missing file is no error.
func TestRemoveFor(t *testing.T) {
	dir := t.TempDir()
	r := record()
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	other := Process{PID: r.Process.PID, StartTime: r.Process.StartTime + 1}
	if removed, err := RemoveFor(dir, other); removed || err != nil {
		t.Fatalf("another process's file: removed %v, %v", removed, err)
	}
	if removed, err := RemoveFor(dir, r.Process); !removed || err != nil {
		t.Fatalf("its own file: removed %v, %v", removed, err)
	}
	if _, err := os.Stat(Path(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the file after RemoveFor: %v", err)
	}
	if removed, err := RemoveFor(dir, r.Process); removed || err != nil {
		t.Fatalf("no file: removed %v, %v", removed, err)
	}
	if err := Remove(dir); err != nil {
		t.Fatalf("Remove of no file: %v", err)
	}
}

// TestAlive: this process is alive by its own record (Self: the start
// time of /proc/self/stat); its pid with another start time is a process
// that got the pid later, not the one recorded; a child that exited and
// was reaped is gone; one not reaped yet (a zombie) still counts.
func TestAlive(t *testing.T) {
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if self.PID != os.Getpid() || self.StartTime == 0 {
		t.Fatalf("Self: %+v", self)
	}
	if alive, err := Alive(self); !alive || err != nil {
		t.Fatalf("this process: alive %v, %v", alive, err)
	}
	if alive, err := Alive(Process{PID: self.PID, StartTime: self.StartTime + 1}); alive || err != nil {
		t.Fatalf("this pid, another start time (a recycled pid): alive %v, %v", alive, err)
	}
	if _, err := Alive(Process{PID: 0, StartTime: 1}); err == nil {
		t.Fatal("pid 0: no error")
	}

	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	start, _, err := startTime(child.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	p := Process{PID: child.Process.Pid, StartTime: start}
	if alive, err := Alive(p); !alive || err != nil {
		t.Fatalf("a running child: alive %v, %v", alive, err)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Killed, not yet reaped: a zombie, which has exited (a supervisor
	// that runs release-lease before it reaps is not refused); wait for
	// the state to say so.
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/stat")
		if err == nil && strings.Contains(string(data), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed child did not become a zombie: %s %v", data, err)
		}
		<-time.After(5 * time.Millisecond)
	}
	if alive, err := Alive(p); alive || err != nil {
		t.Fatalf("a zombie: alive %v, %v, want gone", alive, err)
	}
	_ = child.Wait() // killed: the error says so
	if alive, err := Alive(p); alive || err != nil {
		t.Fatalf("a reaped child: alive %v, %v", alive, err)
	}
}

// TestParseStartTime: field 22 is counted from the last ')', so a command
// name with spaces and parentheses does not shift it.
func TestParseStartTime(t *testing.T) {
	rest := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21"
	for _, comm := range []string{"(enginehealth)", "(a b)", "(x) y (z)", "())"} {
		if v, err := parseStartTime("123 " + comm + rest); err != nil || v != 424242 {
			t.Errorf("%s: %d %v, want 424242", comm, v, err)
		}
	}
	for _, bad := range []string{"", "123 no parens", "123 (x) S 1 2", "123 (x)" + strings.Replace(rest, "424242", "soon", 1)} {
		if _, err := parseStartTime(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
