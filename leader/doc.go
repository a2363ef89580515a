// Package leader elects the one master node through an etcd lease and fences
// the master's writes in PostgreSQL by its term.
//
// # Election
//
// Each candidate holds an etcd lease (the TTL from the config) and puts its
// key "<prefix>leader/<lease id in hex>" under it, with the Candidate (node
// name, incarnation, API address) as JSON value; the key with the lowest
// create revision is the leader key. This is etcd's concurrency.Election
// layout, so its tools show the master, but the protocol is run here on
// plain clientv3 calls, because concurrency.Session and Campaign wait on an
// unresponsive member: the session keeps its lease alive over one stream
// that stays open to a frozen member (and ends the session after the TTL
// although the lease lives), and Campaign, when cancelled, resigns with the
// client's context, which has no deadline.
//
// Every request has its own deadline derived from the TTL. The lease is
// kept alive by one bounded KeepAliveOnce every min(TTL/3, trust window/4),
// and each answer is confirmed by a linearizable read (below); a request
// that times out is retried at once, which the client's round-robin
// balancer sends to the next member, so an unresponsive member costs one
// attempt. A standby reads the election (atomically: is my key there,
// which key is first) every TTL/6 (at most 1 s) besides watching it, since
// a watch served by a frozen member never fires. A node keeps its lease, and so its place in line and
// its term, across rounds for as long as etcd answers that the lease lives.
//
// # Acting, suspended, ended
//
// When its key is first, the node holds the office and calls the leader
// function with a leader-scoped context and an Office. The office *acts*
// (Office.Trusted returns nil) while the last confirmed keep-alive was
// sent less than TTL − TrustMargin ago (the trust window) and the gate
// (the node's own database heartbeat) passes. When keep-alives go
// unanswered the office is suspended, not ended: Trusted fails, so no
// master write starts or commits, and it acts again, in the same term, as
// soon as a keep-alive is confirmed, because a confirmed keep-alive proves
// the lease, and with it the leader key, never expired, so no other node
// can have been elected meanwhile. The leader context is cancelled, with a
// cause, when the office ends: etcd answers that the lease is gone
// (ErrSessionLost), the leader key is deleted or replaced (ErrKeyDeleted),
// the node learns that a newer term is recorded (ErrDeposed: a fenced
// transaction refused, or any read of the term in this node, through
// Elector.ObserveTerm), or Run's context is done (shutdown). On shutdown
// the node revokes its lease at once (bounded by ResignTimeout), so the
// next master takes office without waiting for the TTL.
//
// # What the trust window rests on
//
// Two offices never act at once: an office acts only inside its trust
// window, the window ends TrustMargin before etcd may expire the lease,
// and a new office starts only after the old lease is gone. That holds if
//
//  1. etcd's raft holds: at most one leader per raft term, and a
//     linearizable read is confirmed by a quorum in the current term
//     (etcd's default ReadOnlySafe reads);
//  2. the raft leader keeps a lease it renewed at time t until at least
//     t + TTL, and a new leader extends every lease by at least the TTL
//     (etcd's lessor: a new leader sets every expiry to now + election
//     timeout + TTL);
//  3. the clocks of the etcd leader's host and of this node advance at the
//     same rate to within TrustMargin/TTL (10% at the defaults; NTP keeps
//     real hosts within parts per million).
//
// It does not rest on any single keep-alive answer. etcd renews leases
// in its raft leader's memory, not through raft, and a leader that was
// deposed without knowing it yet answers keep-alives from its own copy:
// "renewed", with the full TTL, while the real leader, which alone expires
// the lease, never sees the renewal. etcd 3.7 checks leadership before a
// renewal (EtcdServer.ensureLeadership) but skips the check when the
// member ticked in the last three ticks (isActive): a leader frozen by
// SIGSTOP, a stalled disk or a starved CPU while the others elected a new
// one ticks at once when it runs again, and can answer before it hears of
// its successor. So a keep-alive counts only when a linearizable read
// sent after its answer sees the same raft term (the term of the last
// entry applied by the member that answered, in the response headers):
// that term's leader was then still the leader, after the renewal, so the
// renewal is the real one (Elector.renew). An answer in an older term is
// not counted and the keep-alive is sent again, to the next member. A
// "lease not found" answer is confirmed the same way before the office
// ends on it. The cost is one count-only read per renewal; failover is
// not slowed.
//
// Evidence (2026-11-25, make faults seed 1, 300 faults, 2 cores busy):
// every keep-alive answer was logged with the member that answered and
// its raft term, beside the etcd members' own logs. 12 of 2,955 answers
// in one run, and 8 of 3,648 in another, came in a raft term that had
// ended more than 0.2 s (up to 2.45 s) before they were sent. One: etcd
// member m2, raft leader in term 5, was SIGSTOPped at 20:51:33.026
// (fault etcd-stop-leader); m3 became leader in term 6 at 34.078; m2 was
// thawed at 36.528 and answered node-a's keep-alive, queued while it was
// frozen, at 36.529, in term 5. Its log shows it stepped down 5 ms
// earlier, so that renewal was forwarded to m3 and was real; nothing in
// the answer tells such a one from a renewal of m2's own copy, which
// etcd's code allows (isActive above) while the member has not stepped
// down, and which would leave the real lease to expire a TTL after the
// last renewal m3 saw. That is the shape of the violation the issue
// reported: all three nodes' keys gone within half a second, one to two
// seconds before their last answered keep-alives implied, the new master
// elected while the old one still trusted such an answer. The runs did
// not catch a false renewal itself (with the confirmation turned off,
// etcd expired 38 leases in a 300-fault run under busy loops, none early;
// the overlap is rare), so the proof is TestDeposedEtcdLeaderCannotExtendTrust,
// which plays that sequence deterministically and fails without the
// confirmation (TestDeposedLeaderTestBites).
//
// The alternative weighed was a lock-delay: a new master that waits out
// the longest trust window a deposed holder could still believe in
// (TTL − TrustMargin: 2 s at lease_ttl 3s, 9 s at the default 10 s)
// before it acts, as Chubby and client-go's observed-time rule do. It
// needs none of the above but adds that wait to every failover, and a
// deposed etcd leader could still extend a holder's belief while it
// lasts. The PostgreSQL fence stays the last line whatever etcd does:
// every master write checks the recorded term in its own transaction.
//
// The fault suite checks assumption 2 directly: it watches every election
// key from outside and fails when etcd deleted one earlier than a TTL
// after the send of any keep-alive its sidecar counted.
//
// # Term and fencing
//
// The term is the leader key's create revision: it only grows. On taking
// office the master raises the one-row leader_term table to its term (only
// upwards, in one statement) and sets the master flag on its own node record
// only. Every later master write goes through Fence.InTx, which first checks
// that the office is trusted, then locks the leader_term row FOR SHARE and
// verifies that the term is still the current one, inside the same
// transaction as the write, and checks trust again before committing. A new
// master's TakeOffice waits for such a transaction to finish, and every
// transaction that starts after it sees the newer term and fails with
// ErrDeposed: a paused or partitioned ex-master can never commit a repair
// after a newer master took office.
//
// # Failure modes
//
//   - One etcd member frozen or killed: requests to it time out and are
//     retried on the others; with the default TTL (10 s) the trust window
//     outlasts an etcd leader election, so the master stays in office.
//   - etcd unreachable or without quorum: keep-alives go unanswered, the
//     office is suspended after TTL − TrustMargin; when etcd answers again
//     it resumes (lease alive) or ends (lease gone).
//   - Process paused (SIGSTOP) past the TTL: on resume, the trust window is
//     already closed (Office.Trusted fails at once) and the next fenced write
//     sees the newer term.
//   - PostgreSQL unreachable: the gate (the node's own heartbeat) fails, so
//     Office.Trusted fails and no master write starts.
//   - etcd rebuilt from scratch (revisions restart): a new term is lower than
//     the recorded one and TakeOffice fails with ErrDeposed; the error says so.
package leader
