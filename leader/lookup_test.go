package leader

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestCandidates: the node that last took office (if still registered in
// that incarnation) and the etcd holder are named; a re-registered name
// is not taken for the old office holder.
func TestCandidates(t *testing.T) {
	b := setup(t)
	a := b.start(t, "a")
	_, o := waitOffice(t, a)
	ctx := context.Background()
	cs, err := Candidates(ctx, a.cli, b.fence, b.prefix, b.addressOf)
	if err != nil || len(cs) != 2 {
		t.Fatalf("candidates %+v %v, want a from the database and from etcd", cs, err)
	}
	for _, c := range cs {
		if c.Name != "a" || c.Incarnation != o.Candidate.Incarnation {
			t.Fatalf("candidate %+v", c)
		}
	}
	gone := func(context.Context, string, string) (string, bool, error) { return "", false, nil }
	cs, err = Candidates(ctx, a.cli, b.fence, b.prefix, gone)
	if err != nil || len(cs) != 1 {
		t.Fatalf("with the office holder's incarnation gone: %+v %v, want the etcd holder only", cs, err)
	}
	a.stop()
	if cs, err := Candidates(ctx, a.cli, b.fence, "/nobody-here/", gone); err == nil {
		t.Fatalf("no holder anywhere: %+v, want an error", cs)
	}
}

// TestCandidatesAnswerByTheDeadline: a database read that hangs past the
// deadline (lib/pq does not always heed a context) does not hide etcd's
// answer: the holder comes back by the deadline, with the database named
// as the lookup that did not answer.
func TestCandidatesAnswerByTheDeadline(t *testing.T) {
	b := setup(t)
	a := b.start(t, "a")
	waitOffice(t, a)
	hang := make(chan struct{})
	defer close(hang)
	hung := func(context.Context, string, string) (string, bool, error) {
		<-hang // heeds no context
		return "", false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cs, err := Candidates(ctx, a.cli, b.fence, b.prefix, hung)
	if len(cs) != 1 || cs[0].Name != "a" {
		t.Fatalf("candidates %+v (%v), want the etcd holder a", cs, err)
	}
	if err == nil || !strings.Contains(err.Error(), "database: did not answer in time") {
		t.Fatalf("err %v, want the lookup that did not answer named", err)
	}
	if ctx.Err() == nil {
		t.Fatalf("answered before the deadline although the database read hangs")
	}
}
