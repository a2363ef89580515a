package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/enginehealth/enginehealth/internal/app/api"
)

// waitPoll is how often `wait ready` asks /readyz.
const waitPoll = 500 * time.Millisecond

func newWaitCmd() *cobra.Command {
	c := group("wait", "Wait for a condition of this node (for scripts and systemd units)")
	var f clientFlags
	var timeout time.Duration
	ready := &cobra.Command{
		Use:   "ready",
		Short: "Wait until this node is ready to run engines; exit 0 then, non-zero with the reason otherwise",
		Long: `Ask the daemon's /readyz every half second until it answers 200: the node is
Ready (start-up recovery done, not in Unexpected shutdown awaiting an ack,
and, with failover.error_not_ready, not in failover grade ERROR). Exit 0
once it is; at --timeout exit 1 with the last reason the daemon gave, or 3
when no daemon ever answered. An engine unit runs it as ExecStartPre (the
drop-in engine-wait-enginehealth.conf: in the packages under
/usr/share/doc/enginehealth/examples/, in the source under systemd/), so
an engine never starts on a node that is not ready.`,
		Example: `  enginehealth wait ready --timeout 10m
  ExecStartPre=/usr/local/bin/enginehealth wait ready --timeout 10m`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.client()
			if err != nil {
				return err
			}
			cl.HTTP.Timeout = 5 * time.Second
			ctx := c.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			var last error
			tick := time.NewTicker(waitPoll)
			defer tick.Stop()
			for {
				r, err := cl.Ready(ctx)
				if err == nil && r.Ready {
					fmt.Fprintf(c.OutOrStdout(), "ready: %s\n", safe(r.Status))
					return nil
				}
				if ctx.Err() == nil {
					last = err
					if err == nil || isStatus(err) {
						last = fmt.Errorf("not ready: %s: %s", r.Status, r.Reason)
					}
				}
				select {
				case <-ctx.Done():
					if last == nil {
						last = ctx.Err()
					}
					when := fmt.Sprintf("after %s", timeout)
					if c.Context().Err() != nil {
						when = "interrupted"
					}
					if errors.Is(last, api.ErrUnreachable) {
						return fmt.Errorf("%s: %w", when, last)
					}
					return fmt.Errorf("%s, %s%s", when, safe(last.Error()), pausedNote(cl))
				case <-tick.C:
				}
			}
		},
	}
	ready.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: wait until interrupted)")
	f.registerAPI(ready)
	c.AddCommand(ready)
	return c
}

// pausedNote says, when the cluster is paused, that this is what holds a
// node back (start-up recovery waits for resume); "" otherwise or when
// the status cannot be read.
func pausedNote(cl *api.Client) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := cl.Status(ctx)
	if err != nil || !st.Paused.Paused {
		return ""
	}
	return "; the cluster is " + safe(st.Paused.String()) + ": start-up recovery and repairs wait for enginehealth resume"
}
