// Package faultinject lets the fault suite turn one safety mechanism off
// at a time, to show that its checker catches what the mechanism
// prevents. Only a binary built with the tag faultinject reads EH_UNSAFE
// (a comma-separated list of mechanisms) and says so on stderr at start;
// in every other build Off is a constant false and the code it guards is
// compiled away.
package faultinject

// Mechanism names a safety mechanism.
type Mechanism string

const (
	// Fencing is the master's term check in every fenced transaction, its
	// trust window, and its stepping down when its lease is lost.
	Fencing Mechanism = "fencing"
	// Predicate is "unclaimed" re-asserted when picking and moving
	// interrupted instances.
	Predicate Mechanism = "predicate"
	// Guard is the disruption guard.
	Guard Mechanism = "guard"
	// AttemptGuard means attempts rows are updated only if their count is the one
	// read.
	AttemptGuard Mechanism = "attempts"
	// Ack means only an operator's ack takes a node out of Unexpected shutdown.
	Ack Mechanism = "ack"
	// Confirm means an etcd keep-alive counts (moves the trust window) only
	// once a linearizable read sent after its answer sees its raft term.
	Confirm Mechanism = "confirm"
	// Wait means a new master acts only once every earlier holder's trust
	// window has surely closed.
	Wait Mechanism = "wait"
	// RaceWindow is no safety mechanism but a test aid: turned "off", a
	// repair batch waits 0.8 s between its snapshot and its writes, so
	// that two masters (fencing off) race on the same attempts rows.
	RaceWindow Mechanism = "window"
)

// Mechanisms lists every mechanism.
var Mechanisms = []Mechanism{Fencing, Predicate, Guard, AttemptGuard, Ack, Confirm, Wait, RaceWindow}
