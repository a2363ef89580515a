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
// kept alive by one bounded KeepAliveOnce every TTL/3; one that times out
// is retried at once, which the client's round-robin balancer sends to the
// next member, so an unresponsive member costs one attempt. A standby reads
// the election (atomically: is my key there, which key is first) every
// TTL/6 (at most 1 s) besides watching it, since a watch served by a frozen
// member never fires. A node keeps its lease, and so its place in line and
// its term, across rounds for as long as etcd answers that the lease lives.
//
// # Acting, suspended, ended
//
// When its key is first, the node holds the office and calls the leader
// function with a leader-scoped context and an Office. The office *acts*
// (Office.Trusted returns nil) while the last answered keep-alive was sent
// less than TTL − TrustMargin ago and the gate (the node's own database
// heartbeat) passes. When keep-alives go unanswered the office is
// suspended, not ended: Trusted fails, so no master write starts or
// commits, and it acts again, in the same term, as soon as a keep-alive is
// answered, because an answered keep-alive proves the lease, and with it the
// leader key, never expired, so no other node can have been elected
// meanwhile. The leader context is cancelled, with a cause, only when the
// office ends: etcd answers that the lease is gone (ErrSessionLost), the
// leader key is deleted or replaced (ErrKeyDeleted), or Run's context is
// done (shutdown). On shutdown the node revokes its lease at once (bounded
// by ResignTimeout), so the next master takes office without waiting for
// the TTL.
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
