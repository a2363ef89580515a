package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// AddressOf returns the API address that node name registered in
// incarnation, and false when that incarnation is no longer registered.
type AddressOf func(ctx context.Context, name, incarnation string) (string, bool, error)

// Candidates names the nodes that may act as master: the one that last
// took office (from the fence's recorded term), if it is still registered
// in that incarnation, and the holder of the etcd election. Both are
// looked up at once within ctx, so an answer comes even without etcd
// quorum. Whether a candidate acts, only it can say.
func Candidates(ctx context.Context, cli *clientv3.Client, fence *Fence, prefix string, addressOf AddressOf) ([]Candidate, error) {
	// etcd gets half the budget: a request that lands on an unresponsive
	// member must not use it all, or the database's answer, which needs no
	// etcd at all, would come too late to be used.
	ectx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ectx, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
		defer cancel()
	}
	type answer struct {
		from string
		c    Candidate
		err  error
	}
	// Buffered: a lookup that answers after ctx ended does not block.
	answers := make(chan answer, 2)
	go func() {
		t, err := fence.Current(ctx)
		if err != nil || t.Incarnation == nil {
			answers <- answer{from: "database", err: err}
			return
		}
		addr, ok, err := addressOf(ctx, t.Node, *t.Incarnation)
		a := answer{from: "database", err: err}
		if err == nil && ok {
			a.c = Candidate{Name: t.Node, Incarnation: *t.Incarnation, APIAddress: addr}
		}
		answers <- a
	}()
	go func() {
		h, err := Current(ectx, cli, prefix)
		answers <- answer{from: "etcd", c: h.Candidate, err: err}
	}()
	// Whatever answered by the deadline is used: a database read that
	// hangs past it (lib/pq does not always heed a context) does not hide
	// etcd's answer, nor the other way round.
	var (
		cs      []Candidate
		errs    []error
		pending = map[string]bool{"database": true, "etcd": true}
	)
wait:
	for len(pending) > 0 {
		select {
		case a := <-answers:
			delete(pending, a.from)
			if a.err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", a.from, a.err))
			}
			if a.c.Name != "" {
				cs = append(cs, a.c)
			}
		case <-ctx.Done():
			for _, from := range []string{"database", "etcd"} {
				if pending[from] {
					errs = append(errs, fmt.Errorf("%s: did not answer in time: %w", from, context.Cause(ctx)))
				}
			}
			break wait
		}
	}
	if len(cs) == 0 {
		return nil, errors.Join(append(errs, errors.New("no node took office"))...)
	}
	return cs, errors.Join(errs...)
}
