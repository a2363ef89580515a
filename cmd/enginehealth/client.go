// What the commands that ask the daemon share (clientCmd: the call, -o
// json or a table), one file per group: nodes.go, check.go, runs.go,
// events.go, holds.go.

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/enginehealth/enginehealth/internal/app/api"
)

// longOp bounds manual runs, which can repair many instances.
const longOp = 10 * time.Minute

// clientCmd builds a command that asks the daemon with call and prints the
// answer as JSON (-o json) or with table.
func clientCmd[T any](c *cobra.Command, f *clientFlags, timeout time.Duration,
	call func(ctx context.Context, cl *api.Client, args []string) (T, error),
	table func(w io.Writer, v T) error,
) *cobra.Command {
	c.RunE = func(c *cobra.Command, args []string) error {
		cl, err := f.client()
		if err != nil {
			return err
		}
		cl.HTTP.Timeout = timeout
		v, err := call(c.Context(), cl, args)
		if err != nil {
			return err
		}
		if f.output == "json" {
			err = writeJSON(c.OutOrStdout(), v)
		} else if err = table(c.OutOrStdout(), v); err == nil && cl.DoneBy != "" {
			_, err = fmt.Fprintf(c.OutOrStdout(), "done by %s\n", safe(cl.DoneBy))
		}
		if r, ok := any(v).(refuser); ok && err == nil {
			err = r.refused()
		}
		return err
	}
	f.register(c)
	return c
}

// refuser is an answer that may say the daemon did not do what was asked
// (printed all the same; the command then exits 4).
type refuser interface{ refused() error }

// refusedError means the daemon answered but refused the operation (exit 4).
type refusedError struct{ error }

// safe escapes the control characters (and invalid UTF-8) of text that
// came from the daemon, so that stored text cannot drive the operator's
// terminal or break a table's rows and columns. Every text field printed
// outside -o json goes through it.
func safe(s string) string { return api.TerminalSafe(s) }

// tabs prints a table: the header, then the rows, in aligned columns,
// without the blanks that pad an empty last cell.
func tabs(w io.Writer, header string, rows func(tw io.Writer)) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	rows(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// checkLimit refuses a --limit the daemon would refuse, as a usage error.
func checkLimit(n int) error {
	if n < 1 || n > api.MaxLimit {
		return usageError{fmt.Errorf("--limit %d: want 1 to %d", n, api.MaxLimit)}
	}
	return nil
}

func opt(p *string) string {
	if p == nil {
		return ""
	}
	return safe(*p)
}
