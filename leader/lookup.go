package leader

import (
	"context"
	"errors"
	"sync"
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
	var (
		wg               sync.WaitGroup
		fromDB, fromEtcd Candidate
		dbErr, etcdErr   error
	)
	// etcd gets half the budget: a request that lands on an unresponsive
	// member must not use it all, or the database's answer, which needs no
	// etcd at all, would come too late to be used.
	ectx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ectx, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
		defer cancel()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		t, err := fence.Current(ctx)
		if err != nil || t.Incarnation == nil {
			dbErr = err
			return
		}
		addr, ok, err := addressOf(ctx, t.Node, *t.Incarnation)
		if err != nil {
			dbErr = err
			return
		}
		if ok {
			fromDB = Candidate{Name: t.Node, Incarnation: *t.Incarnation, APIAddress: addr}
		}
	}()
	go func() {
		defer wg.Done()
		h, err := Current(ectx, cli, prefix)
		fromEtcd, etcdErr = h.Candidate, err
	}()
	wg.Wait()
	var cs []Candidate
	for _, c := range []Candidate{fromDB, fromEtcd} {
		if c.Name != "" {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil, errors.Join(dbErr, etcdErr, errors.New("no node took office"))
	}
	return cs, nil
}
