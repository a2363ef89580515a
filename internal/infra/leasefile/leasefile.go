// Package leasefile is the daemon's record of its etcd election lease on
// disk: a small JSON file, Name, in the node's state directory (systemd's
// $STATE_DIRECTORY), written atomically whenever the lease changes and
// removed on a clean shutdown. `enginehealth release-lease`, which the
// unit runs as ExecStopPost= once the daemon's process is gone, reads it
// and revokes the lease, so that the next master takes office without
// waiting for the lease's TTL. The file holds no secret: the lease, the
// key prefix, the endpoints (without credentials), the node, and the
// process that wrote it (its pid and start time, by which Process.Alive
// tells it from a process that got the same pid later).
package leasefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/enginehealth/enginehealth/internal/infra/safefile"
)

// Name is the state file's name in the state directory.
const Name = "lease.json"

// MaxBytes bounds what Read reads: a record is a few hundred bytes.
const MaxBytes = 64 << 10

// version of the file's format; Read refuses another.
const version = 1

// LeaseID is an etcd lease id, written in hex as etcd's tools (and the
// election keys) show it.
type LeaseID int64

// String returns the id in hex.
func (id LeaseID) String() string { return strconv.FormatInt(int64(id), 16) }

// MarshalText writes the id in hex.
func (id LeaseID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText reads an id in hex.
func (id *LeaseID) UnmarshalText(b []byte) error {
	v, err := strconv.ParseInt(string(b), 16, 64)
	if err != nil {
		return fmt.Errorf("lease %q: not a lease id in hex", b)
	}
	*id = LeaseID(v)
	return nil
}

// Process identifies a process: its pid, and its start time (clock ticks
// after boot, field 22 of /proc/PID/stat), which a later process given
// the same pid does not share.
type Process struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

// Record is the state file's content.
type Record struct {
	Version int `json:"version"`
	// Lease is the election lease the daemon holds; Prefix its cluster's
	// key prefix (etcd.prefix); Endpoints the etcd client's endpoints when
	// it was written (the members, with etcd.auto_sync_interval), without
	// credentials.
	Lease     LeaseID  `json:"lease"`
	Prefix    string   `json:"prefix"`
	Endpoints []string `json:"endpoints"`
	// Node and Incarnation name the daemon, for messages.
	Node        string `json:"node"`
	Incarnation string `json:"incarnation"`
	// Process is the daemon that wrote the file.
	Process   Process   `json:"process"`
	WrittenAt time.Time `json:"written_at"`
}

// Error says why a state file cannot be used; the caller names the file.
type Error struct{ Msg string }

// Error returns Msg.
func (e *Error) Error() string { return e.Msg }

// Path returns the state file's path in dir.
func Path(dir string) string { return filepath.Join(dir, Name) }

// Write replaces the state file in dir with r, atomically: a temporary
// file in dir (mode 0600), synced, renamed over the old one, and the
// directory synced, so that a reader (or a crash) sees the old record or
// the new one, whole. dir is made (0700) when it does not exist.
func Write(dir string, r Record) (err error) {
	r.Version = version
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+Name+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()           // already failing: the first error says why
			_ = os.Remove(f.Name()) // nothing of a failed write is left
		}
	}()
	// CreateTemp makes it 0600; said again, whatever the umask did.
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), Path(dir)); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename or a removal in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir) //nolint:gosec // G304: the configured state directory, opened to sync it
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Read returns the record of the state file in dir. A missing file is an
// error that errors.Is fs.ErrNotExist; a file that is not a regular one,
// is larger than MaxBytes, or holds no valid record is an *Error.
func Read(dir string) (Record, error) {
	if err := trusted(dir); err != nil {
		return Record{}, err
	}
	data, err := safefile.Read(Path(dir), MaxBytes)
	var serr *safefile.Error
	if errors.As(err, &serr) {
		return Record{}, &Error{serr.Msg}
	}
	if err != nil {
		return Record{}, err
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		// Where, not what: the file may be another's, and its content
		// is not repeated.
		where := "a field's value is invalid"
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			where = fmt.Sprintf("malformed JSON at byte %d", syn.Offset)
		case errors.As(err, &typ):
			where = "field " + strconv.Quote(typ.Field) + " has the wrong type"
		}
		return Record{}, &Error{"not a lease record (" + where + ")"}
	}
	switch {
	case r.Version != version:
		return Record{}, &Error{fmt.Sprintf("format version %d, this release reads version %d", r.Version, version)}
	case r.Lease == 0:
		return Record{}, &Error{"no lease in the record"}
	case r.Process.PID <= 0 || r.Process.StartTime == 0:
		return Record{}, &Error{fmt.Sprintf("no valid process in the record (pid %d, start time %d)", r.Process.PID, r.Process.StartTime)}
	}
	return r, nil
}

// trusted refuses a state file another user could have written: a
// symbolic link, a file not owned by this process's user (or root), one
// others may write, or one in a directory others may write (a sticky
// /tmp). A missing file is fs.ErrNotExist.
func trusted(dir string) error {
	me := os.Geteuid()
	for _, c := range []struct {
		path, what string
	}{{dir, "the state directory"}, {Path(dir), "the state file"}} {
		fi, err := os.Lstat(c.path)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return &Error{c.what + " is a symbolic link: refused (a link can name another node's file, or any file)"}
		case ok && int64(st.Uid) != int64(me) && st.Uid != 0:
			return &Error{fmt.Sprintf("%s belongs to user %d, not this user (%d) or root: refused", c.what, st.Uid, me)}
		case fi.Mode().Perm()&0o022 != 0:
			return &Error{fmt.Sprintf("%s is writable by others (mode %s): refused", c.what, fi.Mode().Perm())}
		}
	}
	return nil
}

// Remove deletes the state file in dir; a missing one is no error.
func Remove(dir string) error {
	if err := os.Remove(Path(dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(dir)
}

// RemoveFor deletes the state file in dir if process p wrote it (a
// daemon stopping cleanly, release-lease once it released p's lease),
// and leaves one another process wrote. It reports whether it removed
// one.
func RemoveFor(dir string, p Process) (bool, error) {
	r, err := Read(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case r.Process != p:
		return false, nil
	}
	return true, Remove(dir)
}

// Self returns this process.
func Self() (Process, error) {
	pid := os.Getpid()
	start, _, err := startTime(pid)
	if err != nil {
		return Process{}, err
	}
	return Process{PID: pid, StartTime: start}, nil
}

// Alive reports whether p is still running: a process with p's pid
// exists and started at p's start time. A process that exists under
// that pid but started at another time got the pid later (p is gone). A
// zombie (exited, not yet reaped) is gone: it acts no more. It fails when it
// cannot tell: a process with that pid exists but its /proc entry cannot
// be read (another user's, under hidepid, or another pid namespace's).
func Alive(p Process) (bool, error) {
	if p.PID <= 0 {
		return false, fmt.Errorf("pid %d: not a process", p.PID)
	}
	start, zombie, err := startTime(p.PID)
	if err == nil {
		// A zombie has exited: only its parent has not reaped it yet.
		return start == p.StartTime && !zombie, nil
	}
	// No /proc entry: gone, unless the kernel knows the pid (the entry is
	// hidden from us).
	switch kerr := syscall.Kill(p.PID, 0); {
	case errors.Is(kerr, syscall.ESRCH):
		return false, nil
	case kerr == nil, errors.Is(kerr, syscall.EPERM):
		return false, fmt.Errorf("process %d exists, but its start time cannot be read to tell whether it is the one recorded: %w", p.PID, err)
	default:
		return false, fmt.Errorf("process %d: %w", p.PID, kerr)
	}
}

// startTime reads field 22 (starttime) of /proc/PID/stat, and whether
// the process is a zombie (field 3, state Z: exited, not yet reaped).
func startTime(pid int) (uint64, bool, error) {
	data, err := safefile.Read(fmt.Sprintf("/proc/%d/stat", pid), 4096)
	if err != nil {
		return 0, false, err
	}
	v, err := parseStartTime(string(data))
	if err != nil {
		return 0, false, err
	}
	i := strings.LastIndexByte(string(data), ')')
	fields := strings.Fields(string(data)[i+1:])
	return v, fields[0] == "Z", nil
}

// parseStartTime returns field 22 of a /proc/PID/stat line. Field 2, the
// command in parentheses, may hold spaces and parentheses: the fields are
// counted from the last ')'.
func parseStartTime(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat %q: no command field", stat)
	}
	fields := strings.Fields(stat[i+1:]) // fields[0] is field 3
	if len(fields) < 20 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command, want at least 20", len(fields))
	}
	v, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("/proc stat: start time %q: not a number of clock ticks", fields[19])
	}
	return v, nil
}
