package nodes

import (
	"testing"
	"time"
)

// TestOwnedUpTo: own's answer from one read of a node's interruptions:
// the graded signatures count whatever the interruption judged, the
// batch's count up to it; the newest is the signature whose newest
// interruption is latest (then by id), a graded one included.
func TestOwnedUpTo(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 11, 28, 3, m, 0, 0, time.UTC) }
	a, b, c := Signature{"w", "t", "a"}, Signature{"w", "t", "b"}, Signature{"w", "t", "c"}
	o := newOwned([]ownRow{
		{Signature: c, At: at(15), ID: 5},
		{Signature: a, Graded: true, At: at(10), ID: 1},
		{Signature: a, At: at(30), ID: 6},
		{Signature: b, Graded: true, At: at(20), ID: 2},
		{Signature: b, At: at(20), ID: 7}, // same time as b's graded one: the id decides
	})
	for _, tc := range []struct {
		upTo int64
		n    int
		top  Signature
	}{
		{0, 2, b}, {4, 2, b}, {5, 3, b}, {6, 3, a}, {7, 3, a},
	} {
		n, top := o.upTo(tc.upTo)
		if n != tc.n || top != tc.top {
			t.Errorf("up to %d: %d, newest %v; want %d, newest %v", tc.upTo, n, top, tc.n, tc.top)
		}
	}
	none := newOwned([]ownRow{{Signature: c, At: at(1), ID: 9}})
	if n, top := none.upTo(8); n != 0 || top != (Signature{}) {
		t.Errorf("nothing graded, the batch's interruption after: %d %v, want none", n, top)
	}
	if n, top := none.upTo(9); n != 1 || top != c {
		t.Errorf("nothing graded, the batch's interruption up to: %d %v, want c", n, top)
	}
}
