package leader

import (
	"context"
	"testing"
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
