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
// that fails is retried at once as two sent together (call), which the
// client's round-robin balancer sends to two members, so an unresponsive
// member costs one attempt. A standby reads the election (atomically: is my key there,
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
// the node ends its office, marks its lease resigned and revokes it at
// once (bounded by ResignTimeout), so the next master takes office without
// waiting for the TTL, and acts at once.
//
// # Never two acting masters
//
// Two offices never act at once, whatever etcd does with a lease:
//
//  1. An office acts only inside its trust window: less than W =
//     TTL − TrustMargin after the send of the last keep-alive it counted.
//     A keep-alive counts only when a linearizable read sent after its
//     answer sees the same raft term (Elector.renew): that term's leader
//     was still the leader after it renewed the lease, so the renewal
//     happened on the real leader, while the lease and the holder's key
//     existed. Every counted keep-alive was therefore sent before the
//     holder's key was deleted, and the holder's window ends less than W
//     after that deletion.
//  2. A new office takes office (records its term, which fences every
//     earlier master's writes) at once, but acts only from
//     Office.ActingFrom: W after it found each key that was ahead of its
//     own gone, and W after its candidacy first read the election (for a
//     holder whose key went before that), each W the holder's own (its
//     election value carries it). A holder that resigned is not waited
//     for: it ended its office, then wrote a marker (ResignedPrefix), then
//     revoked its lease. A holder that learns its lease or key is gone
//     writes the same marker once its office has ended, so a successor
//     that reads it acts at once too; one that cannot hear from etcd
//     writes nothing and is waited out. The first master a schema ever
//     had (no term recorded before) does not wait either.
//
// That rests on etcd's raft (at most one leader per term; linearizable
// reads confirmed by a quorum in the current term, etcd's default
// ReadOnlySafe reads; a key's deletion ordered with every read) and on
// the hosts' clocks advancing at the same rate (a holder's W and its
// successor's wait are measured on their own clocks). It does not rest on
// etcd keeping a lease a TTL after a renewal, nor on any single answer:
// both failed on a busy host (below). Without 2, an early revocation gives
// two acting masters; without 1, a deposed etcd leader's answers extend a
// holder's window after its key is gone, past any wait. The PostgreSQL
// fence stays the last line for writes.
//
// The price is the wait: after a master dies (or its lease is revoked) its
// successor takes office when the lease is gone, as before, and acts W
// later (2 s at lease_ttl 3s, 9 s at the default 10 s); after a graceful
// stop it acts at once. Measured in BenchmarkFailover (failover-ms: in
// office; acting-ms). The alternatives weighed: anchoring trust on the
// TTL etcd returns (a deposed leader returns the full TTL too); a gap
// between a recorded term change and the new term's first action
// measured in PostgreSQL (the same wait, with a second clock in play);
// a check of the term row in every acting answer (the answer still races
// with the successor's first action, by a read's latency).
//
// A master whose process died on a host that lives (SIGKILL, an OOM kill,
// a panic) cannot resign, but systemd knows it is gone: the daemon keeps
// its lease in a state file (Config.OnLease), and `enginehealth
// release-lease`, the unit's ExecStopPost=, revokes it (RevokeLease) once
// every process of the unit has exited. The successor then takes office
// at once instead of after the TTL, and still acts W later: the
// revocation writes no resignation marker, since only a holder knows that
// it stopped acting. So a revocation made in error (the holder alive
// after all, a person running it by hand past its own checks) costs a
// failover, never two acting masters. A host that dies runs no
// ExecStopPost=: its lease expires after the TTL, as before. Measured in
// BenchmarkFailover/crash-released.
//
// # What etcd 3.7 does with leases on a busy host
//
// etcd renews leases in its raft leader's memory, not through raft, and
// revokes expired ones from there. A leader frozen (SIGSTOP, a stalled
// disk, a starved CPU) while the other members elect a new one keeps
// believing it leads when it runs again, until it hears of its
// successor. Before renewing or revoking, etcd 3.7 checks its leadership
// (EtcdServer.ensureLeadership, the fix of etcd issue 15247) but skips the
// check when the member ticked within the last three ticks (isActive), as
// a thawed member does at once. So such a member
//
//   - answers keep-alives "renewed", in its old raft term, renewing only
//     its own stale copy, which nobody reads; and
//   - finds, in that stale copy, leases it thinks expired (their renewals
//     went to the new leader) and revokes them: a follower by then, it
//     forwards the revocation to the new leader, which applies it. Every
//     lease it thought expired goes at once, seconds before a TTL after
//     renewals the real leader made.
//
// Evidence (make faults, seed 1, 300 faults, STARVE=busy, 2026-11-25;
// every counted keep-alive logged with the member that answered and its
// raft term, beside the members' own logs): etcd member m3, raft leader in
// term 8, stalled (its log: heartbeats not sent on time) until about
// 22:02:19.8; m2 became leader in term 9 at 17.245 and renewed node-b's
// lease (the master, term 56) on every keep-alive, forwarded by m1 and
// confirmed by reads in term 9, the last sent at 19.768. m3 stepped down
// at 19.818; by 19.83 node-b's lease was gone ("lease not found" when
// node-b itself went to revoke it, at 20.064): a lease the leader renewed
// 60 ms before goes only by a revocation, and no sidecar had sent one.
// node-a (term 60) was elected at 19.831, and, with no wait, node-b
// (trusting its window until 21.768) and node-a both acted for 50 ms (two
// probe rounds): the shape of the violation, a key gone a second
// or more early. The first shape (an answer in an ended term) was seen
// too: 12 of 2,955 and 8 of 3,648 answers in two runs came in a raft term
// that had ended more than 0.2 s (up to 2.45 s) before they were sent; in the one traced
// (member m2 thawed at 20:51:36.528 after a 3.5 s freeze, answered at
// 36.529 in term 5, m3 leader in term 6 since 34.078) m2 had stepped down
// 5 ms before and forwarded the renewal, so it was real, but nothing in
// the answer tells. With both fixes, the same run (seed 1, STARVE=busy,
// 300 faults) had no round with two acting masters in 20,804, while etcd
// removed 6 of the 85 leases it ended early: all three nodes' at the same
// instant (23:10:40.663, 125–311 ms before a TTL after keep-alives the
// real leader had renewed: the pattern), and three more, two of
// them at one instant, 1.07 and 1.17 s early; each successor waited out
// the window. Without starvation (seed 1, STARVE=off) the same: etcd
// member m2, leader in term 30, logged nothing from 23:36:30 to 41.783
// (then: heartbeats not sent on time); m3 became leader in term 31 at
// 40.496; m2 stepped down at 41.783, and all three nodes' leases were
// gone at 41.786, 1.2–2.1 s before a TTL after keep-alives m3 had
// renewed; no two masters acted.
// TestDeposedEtcdLeaderCannotExtendTrust and
// TestNewMasterWaitsOutRevokedHolder play both shapes deterministically;
// the fault suite reports the leases etcd removed early.
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
