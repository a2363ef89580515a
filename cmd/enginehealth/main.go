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

	"github.com/enginehealth/enginehealth/configs"
	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/nodes"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
		fmt.Fprintln(stderr, "enginehealth:", err)
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

// refusal: the daemon answered but would not do it now (exit 4): a
// conflict, or a mutation that found no master to do it or a busy daemon
// (a 503 the daemon marks as a refusal). Any other error answer is a
// failure (exit 1): e.g. the database is down.
func refusal(e *api.StatusError) bool {
	return e.Code == http.StatusConflict || e.Code == http.StatusServiceUnavailable && e.Refused && e.Method != http.MethodGet
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
	root.PersistentPreRunE = emptyFlags
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
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
		newRunsCmd(),
		newEventsCmd(),
		newHoldsCmd(),
		newRetryCmd(),
		newRetriesCmd(),
		newWaitCmd(),
		newVersionCmd(),
	)
	onceFlags(root)
	// cobra's help and completion commands print help and exit 0 for a
	// topic or shell they do not know: a usage error here, as for any
	// other command.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			show := c.Run
			c.Run, c.RunE = nil, func(c *cobra.Command, args []string) error {
				if _, rest, err := c.Root().Find(args); err != nil || len(rest) > 0 {
					return usageError{fmt.Errorf("no help topic %q (see %s --help)", strings.Join(args, " "), c.Root().Name())}
				}
				show(c, args)
				return nil
			}
		case "completion":
			c.Args = unknownCommand
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
			for _, shell := range c.Commands() {
				shell.Args = usageArgs(cobra.NoArgs)
			}
		}
	}
	return root
}

// onceFlags makes every single-valued flag of c and its subcommands a
// usage error when given twice: "events --instance a --instance b" showed
// b alone, without a word. Repeatable flags (lists) are left as they are.
func onceFlags(c *cobra.Command) {
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if _, list := f.Value.(pflag.SliceValue); !list {
			f.Value = &onceValue{Value: f.Value}
		}
	})
	for _, sub := range c.Commands() {
		onceFlags(sub)
	}
}

// onceValue is a flag value that may be set once.
type onceValue struct {
	pflag.Value
	set bool
}

func (o *onceValue) Set(v string) error {
	if o.set {
		return errors.New("given more than once")
	}
	o.set = true
	return o.Value.Set(v)
}

// emptyFlags refuses a name flag given an empty value: --workflow "" (a
// script's unset variable) would otherwise mean no filter, every
// workflow, and "holds fail --all --workflow $WF" would fail every hold.
// Only --reason may be empty (the default reason is said then).
func emptyFlags(c *cobra.Command, _ []string) error {
	var err error
	c.Flags().Visit(func(f *pflag.Flag) {
		if err != nil || f.Name == "reason" {
			return
		}
		var vals []string
		switch sv := f.Value.(type) {
		case pflag.SliceValue:
			vals = sv.GetSlice()
			if len(vals) == 0 {
				vals = []string{""}
			}
		default:
			if f.Value.Type() == "string" {
				vals = []string{f.Value.String()}
			}
		}
		for _, v := range vals {
			if strings.TrimSpace(v) == "" {
				err = usageError{fmt.Errorf("--%s: an empty value (omit the flag instead; see %s --help)", f.Name, c.CommandPath())}
				return
			}
		}
	})
	return err
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

// nodeArgs is v, and each argument a valid node name: the API would
// refuse it, or the path the client builds of it (a slash is sent
// encoded), so say it here as a usage error.
func nodeArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return usageArgs(func(c *cobra.Command, args []string) error {
		if err := v(c, args); err != nil {
			return err
		}
		for _, a := range args {
			if err := nodes.ValidName(a); err != nil {
				return errors.New(strings.Replace(strings.TrimPrefix(err.Error(), "nodes: "), "invalid name", "invalid node name", 1))
			}
		}
		return nil
	})
}

// usageArgs marks the errors of an argument validator as usage errors.
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := v(c, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// unknownCommand refuses, as a usage error, a first argument of the root
// that names no command.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	err := fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath())
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		err = fmt.Errorf("%w (did you mean %s?)", err, strings.Join(s, " or "))
	}
	return usageError{err}
}

// noArgs rejects positional arguments as a usage error.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s takes no arguments, got %q", c.CommandPath(), args)}
	}
	return nil
}
