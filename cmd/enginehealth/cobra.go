// Where enginehealth's commands are stricter than cobra's defaults, in
// one place: strict sets it all on the root once its commands are added,
// and the argument checks below are what commands use for Args.

package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/enginehealth/enginehealth/nodes"
)

// strict makes root and its commands refuse, as usage errors (exit 2),
// what cobra lets through or answers with untyped text: a flag error
// (SetFlagErrorFunc), a name flag given an empty value (emptyFlags), a
// single-valued flag given twice (onceFlags), and a help topic or a
// completion shell it does not know.
func strict(root *cobra.Command) {
	root.PersistentPreRunE = emptyFlags
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
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
