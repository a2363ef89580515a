package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Membership changes, as an operator makes them with etcdctl: Add (member
// add, then a new process with initial-cluster-state existing), AddLearner
// (member add --learner of a member never started), Remove (member
// remove, then the process is gone) and Replace (both, one after the
// other). Each request is retried until ctx ends: etcd refuses a
// reconfiguration for a few seconds after one (its strict reconfiguration
// check wants members connected for a while).

// Add adds a new voting member (member add) with a new name, data
// directory and ports, starts it with initial-cluster-state existing,
// and waits until it is ready and the cluster healthy. The member is
// appended to Members.
func (c *Cluster) Add(ctx context.Context) (*Member, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	m := c.newMember(ports[0], ports[1])
	var members []*etcdserverpb.Member
	var id uint64
	err = c.reconfigure(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		// A request that took effect but whose answer was lost is not
		// made twice.
		if ml, err := cli.MemberList(ctx); err == nil {
			if i := slices.IndexFunc(ml.Members, func(o *etcdserverpb.Member) bool { return slices.Contains(o.PeerURLs, m.PeerURL) }); i >= 0 {
				members, id = ml.Members, ml.Members[i].ID
				return nil
			}
		}
		resp, err := cli.MemberAdd(ctx, []string{m.PeerURL})
		if err != nil {
			return err
		}
		members, id = resp.Members, resp.Member.ID
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("etcdtest: member add %s: %w", m.Name, err)
	}
	var initial []string
	for _, o := range members {
		name := o.Name
		if o.ID == id {
			name = m.Name
		}
		if name == "" || len(o.PeerURLs) == 0 || o.IsLearner {
			continue // another member added and not started: not in the initial cluster
		}
		initial = append(initial, name+"="+o.PeerURLs[0])
	}
	ready := make(chan error, 1)
	if err := m.start(strings.Join(initial, ","), "existing", ready); err != nil {
		return nil, err
	}
	c.Members = append(c.Members, m)
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = fmt.Errorf("etcdtest: member %s not ready: %w", m.Name, ctx.Err())
	}
	if err != nil {
		return m, err
	}
	return m, c.WaitHealthy(ctx)
}

// AddLearner adds a learner (member add --learner) that is never
// started: its peer URL is a free port nothing listens on. It returns the
// learner's member ID; the learner is no member of Members.
func (c *Cluster) AddLearner(ctx context.Context) (uint64, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	var id uint64
	err = c.reconfigure(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		if ml, err := cli.MemberList(ctx); err == nil {
			if i := slices.IndexFunc(ml.Members, func(o *etcdserverpb.Member) bool { return slices.Contains(o.PeerURLs, peer) }); i >= 0 {
				id = ml.Members[i].ID
				return nil
			}
		}
		resp, err := cli.MemberAddAsLearner(ctx, []string{peer})
		if err == nil {
			id = resp.Member.ID
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("etcdtest: member add --learner %s: %w", peer, err)
	}
	return id, nil
}

// RemoveID removes the member with id (member remove) without touching
// any process: for a learner AddLearner made.
func (c *Cluster) RemoveID(ctx context.Context, id uint64) error {
	return c.reconfigure(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.MemberRemove(ctx, id)
		return err
	})
}

// Remove removes m from the cluster (member remove, asked of the other
// members), then kills its process (a removed member may stop by itself)
// and waits until it has exited, so its ports are closed. m leaves
// Members.
func (c *Cluster) Remove(ctx context.Context, m *Member) error {
	others := slices.DeleteFunc(slices.Clone(c.Members), func(o *Member) bool { return o == m })
	if len(others) == len(c.Members) {
		return fmt.Errorf("etcdtest: %s is no member of the cluster", m.Name)
	}
	var eps []string
	for _, o := range others {
		eps = append(eps, o.Endpoint())
	}
	err := c.reconfigureVia(ctx, eps, func(ctx context.Context, cli *clientv3.Client) error {
		ml, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(ml.Members, func(o *etcdserverpb.Member) bool { return slices.Contains(o.PeerURLs, m.PeerURL) })
		if i < 0 {
			return nil // removed by an earlier attempt whose answer was lost
		}
		_, err = cli.MemberRemove(ctx, ml.Members[i].ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("etcdtest: member remove %s: %w", m.Name, err)
	}
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill() // it may have exited already
		<-done
	}
	c.Members = others
	c.removed = append(c.removed, m)
	return nil
}

// Replace replaces m with a new member, as an operator replaces a dead
// host: Remove, then Add. It returns the new member.
func (c *Cluster) Replace(ctx context.Context, m *Member) (*Member, error) {
	if err := c.Remove(ctx, m); err != nil {
		return nil, err
	}
	return c.Add(ctx)
}

// permanent reports whether a reconfiguration's error stays the same on a
// retry (unlike an unhealthy cluster, no leader, a timeout).
func permanent(err error) bool {
	for _, p := range []error{rpctypes.ErrTooManyLearners, rpctypes.ErrPeerURLExist, rpctypes.ErrMemberNotFound,
		rpctypes.ErrMemberNotLearner, rpctypes.ErrPermissionDenied, rpctypes.ErrAuthFailed, rpctypes.ErrUserEmpty} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}

// reconfigure runs op with a client of every member until it succeeds,
// fails for good (permanent), or ctx ends.
func (c *Cluster) reconfigure(ctx context.Context, op func(context.Context, *clientv3.Client) error) error {
	return c.reconfigureVia(ctx, c.Endpoints(), op)
}

func (c *Cluster) reconfigureVia(ctx context.Context, endpoints []string, op func(context.Context, *clientv3.Client) error) error {
	var cli *clientv3.Client
	defer func() {
		if cli != nil {
			_ = cli.Close()
		}
	}()
	var last error
	for {
		if cli == nil {
			// With auth on, making the client authenticates, which waits
			// for a raft leader (the one just removed, maybe): retried too.
			cli, last = c.clientOf(endpoints...)
		}
		if cli != nil {
			octx, cancel := context.WithTimeout(ctx, 5*time.Second)
			last = op(octx, cli)
			cancel()
			if last == nil {
				return nil
			}
			if permanent(last) {
				return last
			}
		}
		select {
		case <-ctx.Done():
			return errors.Join(last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
