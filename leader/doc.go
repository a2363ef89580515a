// Package leader elects the one master node through an etcd lease and fences
// the master's writes in PostgreSQL by its term.
//
// # Election
//
// Elector.Run campaigns with a concurrency.Session (lease TTL from the
// config) and concurrency.Election under "<prefix>leader/". The election
// value is the Candidate (node name, incarnation, API address) as JSON.
// When Campaign returns, the elector does not trust it alone (Campaign can
// return after the session already expired): it checks that the session is
// alive, that the first key under the prefix is its own at its own revision,
// and that the lease is inside its trust window. Only then does it call the
// leader function with a leader-scoped context and an Office.
//
// The leader-scoped context is cancelled, with a cause, the moment any of
// these happens: the session ends (lease expired or revoked, keep-alives
// stopped), the trust window closes (no keep-alive answer for
// TTL − TrustMargin: the elector steps down before etcd would expire the
// lease, so a partitioned master stops acting before another can take
// office), or the leader key is deleted. The elector then resigns, closes the
// session (revoking the lease) and campaigns again with a new session. On
// shutdown it resigns at once, so the next master takes office without
// waiting for the TTL.
//
// # Term and fencing
//
// The term is the leader key's create revision: it only grows. On taking
// office the master raises the one-row leader_term table to its term (only
// upwards, in one statement) and sets the master flag on its own node record
// only. Every later master write goes through Fence.InTx, which first checks
// that the office is still trusted, then locks the leader_term row FOR SHARE
// and verifies that the term is still the current one, inside the same
// transaction as the write. A new master's TakeOffice waits for such a
// transaction to finish, and every transaction that starts after it sees the
// newer term and fails with ErrDeposed: a paused or partitioned ex-master can
// never commit a repair after a newer master took office.
//
// # Failure modes
//
//   - etcd unreachable: keep-alives stop, the trust window closes after
//     TTL − TrustMargin, the leader context is cancelled; the elector retries
//     with backoff.
//   - Process paused (SIGSTOP) past the TTL: on resume, the trust window is
//     already closed (Office.Trusted fails at once) and the next fenced write
//     sees the newer term.
//   - PostgreSQL unreachable: the gate (the node's own heartbeat) fails, so
//     Office.Trusted fails and no master write starts.
//   - etcd rebuilt from scratch (revisions restart): a new term is lower than
//     the recorded one and TakeOffice fails with ErrDeposed; the error says so.
package leader
