// Package safefile reads a file a configuration names without trusting
// what is at that path: only a regular file is read, never more than a
// limit, and opening never blocks (a FIFO or a device at the path, by
// mistake or malice, would hang a reader or feed it without end).
package safefile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Error says why a file was not read; it names no path (the caller
// does, as its messages do).
type Error struct{ Msg string }

// Error returns Msg.
func (e *Error) Error() string { return e.Msg }

// Read returns the contents of the regular file at path, of at most limit
// bytes. Open and read errors are *fs.PathError as os returns them; a
// path that is not a regular file, or a file over limit, is an *Error.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: nothing to act on
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &Error{fmt.Sprintf("not a regular file (%s)", Kind(st.Mode()))}
	}
	if st.Size() > limit {
		return nil, &Error{fmt.Sprintf("%d bytes, more than the limit of %d", st.Size(), limit)}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &Error{fmt.Sprintf("more than the limit of %d bytes", limit)}
	}
	return data, nil
}

// Kind names what a file mode is, for messages: "a directory", "a FIFO"…
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsRegular():
		return "a regular file"
	}
	return m.Type().String()
}
