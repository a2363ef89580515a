// Command enginehealth is the engine-health and interrupt-recovery sidecar:
// the daemon (enginehealth run) and the operator CLI, a thin client of the
// daemon's HTTP API.
//
// Exit codes: 0 success; 1 failure; 2 invalid configuration or usage;
// 3 no daemon reachable; 4 refused by the daemon: a conflict (409: the
// state does not allow it now), a mutation no master could take (503:
// not the master and none acting, the election changing, busy), a check
// the disruption guard or a pause stopped.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/app/api"
)

// clock is the time the commands measure ages and "1h ago" from (a test
// fixes it).
var clock = time.Now

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitUnreachable = 3
	exitRefused     = 4
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	// The first signal starts a clean, bounded shutdown; a second one ends
	// the process at once.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError marks errors in how the command was called.
type usageError struct{ error }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if !errors.Is(err, errNotReady) {
		fmt.Fprintln(stderr, "enginehealth:", terminalLines(err.Error()))
	}
	var cerr *configs.Error
	var uerr usageError
	var serr *api.StatusError
	var rerr refusedError
	switch {
	case errors.As(err, &serr) && refusal(serr), errors.As(err, &rerr):
		return exitRefused
	case errors.As(err, &cerr), errors.As(err, &uerr):
		return exitUsage
	case errors.Is(err, api.ErrUnreachable):
		return exitUnreachable
	default:
		return exitFailure
	}
}

// refusal reports whether the daemon answered but would not do it now (exit 4): a
// conflict, or a mutation that found no master to do it or a busy daemon
// (a 503 the daemon marks as a refusal). Any other error answer is a
// failure (exit 1): e.g. the database is down.
func refusal(e *api.StatusError) bool {
	return e.Code == http.StatusConflict || e.Code == http.StatusServiceUnavailable && e.Refused && e.Method != http.MethodGet
}

// terminalText is s with what could rewrite a terminal (escape
// sequences, carriage returns, bidirectional overrides…) escaped as
// api.TerminalSafe does, its line breaks and tabs kept.
func terminalText(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		cells := strings.Split(l, "\t")
		for j, c := range cells {
			cells[j] = api.TerminalSafe(c)
		}
		lines[i] = strings.Join(cells, "\t")
	}
	return strings.Join(lines, "\n")
}

// terminalLines is an error's text made terminalText (an error quotes
// paths, etcd's and servers' messages, which anyone may have written),
// each line after the first indented unless it is already (a list of
// problems is), so that a line break in what it quotes cannot start a
// line of its own ("enginehealth: …") at the margin.
func terminalLines(s string) string {
	lines := strings.Split(terminalText(s), "\n")
	for i, l := range lines {
		if i > 0 && l != "" && l[0] != ' ' && l[0] != '\t' {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n")
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "enginehealth",
		Version:       version, // --version: the version alone (enginehealth version says the build)
		Short:         "Engine-health and interrupt-recovery sidecar for workflow engines",
		SilenceUsage:  true,
		SilenceErrors: true,
		// A root with its own argument check and run: cobra's default
		// check of an unknown command returns untyped text.
		Args:                       unknownCommand,
		SuggestionsMinimumDistance: 2,
		RunE:                       func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	root.SetVersionTemplate("enginehealth {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newRunCmd(),
		newConfigCmd(),
		newMigrateCmd(),
		newNodesCmd(),
		newNodeCmd(),
		newStatusCmd(),
		newCheckCmd(),
		newPauseCmd(true),
		newPauseCmd(false),
		newRecoverCmd(),
		newReleaseLeaseCmd(),
		newRunsCmd(),
		newEventsCmd(),
		newHoldsCmd(),
		newRetryCmd(),
		newRetriesCmd(),
		newWaitCmd(),
		newVersionCmd(),
	)
	strict(root)
	return root
}

// group is a command that only holds subcommands: alone it prints its
// help; a word that names none of them is a usage error (exit 2).
func group(use, short string) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: unknownCommand,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() }}
}

// configFlag registers the --config flag.
func configFlag(c *cobra.Command, path *string) {
	c.Flags().StringVarP(path, "config", "c", "/etc/enginehealth/enginehealth.yaml", "configuration file")
}
