// enginehealth nodes and enginehealth node: the node records, and the
// operator's decisions on a node.

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/enginehealth/enginehealth/internal/app/api"
	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
)

func newNodesCmd() *cobra.Command {
	var f clientFlags
	c := &cobra.Command{Use: "nodes [NAME]", Short: "List the engine nodes (or show one, with its grade's cause)",
		Long: `List the engine nodes as the registry records them. MASTER marks the node that
acts as master now (asked of the cluster, GET /v1/leader); while none acts
(an etcd outage, an election), "(*)" marks the node that took office last,
as its record says, and a line below says why none acts.`,
		Example: "  enginehealth nodes\n  enginehealth nodes n2\n  enginehealth nodes -o json",
		Args:    nodeArgs(cobra.MaximumNArgs(1))}
	return clientCmd(c, &f, 30*time.Second,
		func(ctx context.Context, cl *api.Client, args []string) (nodeList, error) {
			var l nodeList
			if len(args) == 1 {
				n, err := cl.Node(ctx, args[0])
				l.nodes, l.one = []apitype.Node{n}, true
				if err != nil {
					return l, err
				}
			} else {
				ns, err := cl.Nodes(ctx)
				if err != nil {
					return l, err
				}
				l.nodes = ns
			}
			// Who acts: known (an answer), none (the daemon says no node
			// acts), or unknown (any other error): then the records'
			// is_master is shown as it is.
			m, err := cl.Leader(ctx)
			var se *api.StatusError
			switch {
			case err == nil:
				l.acting = m.Name
			case errors.As(err, &se) && se.Code == http.StatusServiceUnavailable && se.Msg == api.ErrNoActingMaster.Error():
				l.none = cmp.Or(se.Detail, se.Msg)
			default:
				l.unknown = true
			}
			return l, nil
		},
		func(w io.Writer, l nodeList) error {
			took := false
			err := tabs(w, "NAME\tSTATUS\tMASTER\tLAST ACTIVE\tGRADE\tVERSION\tAPI\tREASON", func(tw io.Writer) {
				for _, n := range l.nodes {
					master := ""
					switch {
					case l.unknown && n.IsMaster, l.acting != "" && n.Name == l.acting:
						master = "*"
					case l.none != "" && n.IsMaster:
						master, took = "(*)", true
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fs ago\t%s\t%s\t%s\t%s\n", safe(n.Name), safe(string(n.Status)), master,
						n.SecondsSinceActive, safe(n.FailoverGrade), safe(n.Version), safe(n.APIAddress), safe(n.StatusReason))
				}
			})
			if err == nil && l.none != "" && (!l.one || took) {
				line := "\nno node acts as master: " + safe(l.none)
				if took {
					line += "; (*) took office last"
				}
				_, err = fmt.Fprintln(w, line)
			}
			if l.one && l.nodes[0].GradeChangedAt != nil && err == nil {
				n := l.nodes[0]
				_, err = fmt.Fprintf(w, "\ngrade %s since %s (%s): %s\n", safe(n.FailoverGrade),
					n.GradeChangedAt.UTC().Format(time.RFC3339), safe(cmp.Or(n.GradeSignature, "no signature")), safe(n.GradeReason))
			}
			return err
		})
}

// nodeList is what nodes shows: the records (one, for nodes NAME) and
// who acts as master now, since a record's is_master only says who took
// office last. -o json prints the records alone, as the API answers them.
type nodeList struct {
	nodes []apitype.Node
	one   bool
	// acting is the acting master's name; none, when no node acts, why;
	// unknown, that the daemon did not say (the records' is_master is shown).
	acting, none string
	unknown      bool
}

func (l nodeList) MarshalJSON() ([]byte, error) {
	if l.one {
		return json.Marshal(l.nodes[0])
	}
	return json.Marshal(l.nodes)
}

func newNodeCmd() *cobra.Command {
	c := group("node", "Act on one node")
	var f clientFlags
	var reason string
	ack := clientCmd(&cobra.Command{
		Use:   "ack NAME",
		Short: "Acknowledge a node's unexpected shutdown: it goes to Recovering, then Ready (token required)",
		Long: `Acknowledge that a node in Unexpected shutdown was looked at: it goes to
Recovering, with a node_ack event naming the reason, and the master makes
it Ready after start-up recovery (then its engine may start: wait ready).
Needs the API token. Refused (exit code 4) when the node is not in
Unexpected shutdown.`,
		Example: `  enginehealth node ack n2 --reason "kernel panic, host replaced"`,
		Args:    nodeArgs(cobra.ExactArgs(1)),
	}, &f, 30*time.Second,
		func(ctx context.Context, cl *api.Client, args []string) (apitype.Node, error) {
			return cl.Ack(ctx, args[0], reason)
		},
		func(w io.Writer, n apitype.Node) error {
			_, err := fmt.Fprintf(w, "node %s acknowledged: %s\n", safe(n.Name), safe(string(n.Status)))
			return err
		})
	ack.Flags().StringVar(&reason, "reason", "", "recorded in the event (default: acknowledged by an operator)")
	var gf clientFlags
	var greason string
	reset := clientCmd(&cobra.Command{
		Use:   "reset-grade NAME",
		Short: "Reset a node's failover grade to NORMAL (token required)",
		Long: `Reset a node's failover grade (WARNING or ERROR) to NORMAL at once, with an
event naming the operator's reason; without it the grade goes back to NORMAL
after failover.quiet_period without interruptions. Refused (exit code 4)
when the grade is NORMAL already.`,
		Example: `  enginehealth node reset-grade n2 --reason "disk replaced"`,
		Args:    nodeArgs(cobra.ExactArgs(1)),
	}, &gf, 30*time.Second,
		func(ctx context.Context, cl *api.Client, args []string) (apitype.GradeChange, error) {
			return cl.ResetGrade(ctx, args[0], greason)
		},
		func(w io.Writer, g apitype.GradeChange) error {
			_, err := fmt.Fprintf(w, "node %s: failover grade %s -> %s\n", safe(g.Name), safe(g.From), safe(g.To))
			return err
		})
	reset.Flags().StringVar(&greason, "reason", "", "recorded in the event (default: reset by an operator)")
	c.AddCommand(ack, reset)
	return c
}
