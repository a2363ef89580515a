package e2e

// The fault suite's checker: triggers record every move of an instance,
// every claim taken or ended and every event with its transaction (in one
// sequence, in the order the statements ran); after the run, queries
// over that record, the events, runs, attempts and node records check the
// invariants. It reads only the database; where it can, what the sidecar
// did (the recorded moves, claims and node changes) rather than what its
// events say it did. Terms, retries and holds are checked over the events
// themselves, against the moves where an event says an instance moved.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
)

// recorderSQL installs the record: faults.moves (each change of an
// order's status: by whom, in which transaction, whether a live claim was
// visible), faults.claim_ops (each claim inserted or deleted) and
// faults.event_tx (each event's transaction).
const recorderSQL = `
CREATE SCHEMA faults;
CREATE SEQUENCE faults.seq;
-- A sidecar's move also records whether its transaction holds the term
-- row (the fence's SELECT … FOR SHARE takes a RowShareLock on the table)
-- and the term recorded there.
CREATE TABLE faults.moves (
	seq bigint NOT NULL DEFAULT nextval('faults.seq'), tx bigint NOT NULL, at timestamptz NOT NULL, app text NOT NULL,
	instance bigint NOT NULL, from_state text NOT NULL, to_state text NOT NULL, live_claims int NOT NULL,
	fenced boolean, term bigint);
CREATE TABLE faults.claim_ops (
	seq bigint NOT NULL DEFAULT nextval('faults.seq'), tx bigint NOT NULL, app text NOT NULL, op text NOT NULL,
	instance bigint NOT NULL, token text NOT NULL, node text NOT NULL);
CREATE TABLE faults.event_tx (seq bigint NOT NULL DEFAULT nextval('faults.seq'), event_id bigint NOT NULL, tx bigint NOT NULL);
-- The checker's joins: by instance in sequence order, and by transaction.
CREATE INDEX ON faults.moves (instance, seq);
CREATE INDEX ON faults.moves (tx);
CREATE INDEX ON faults.claim_ops (tx);
CREATE INDEX ON faults.event_tx (tx);
CREATE INDEX ON faults.event_tx (event_id);
CREATE FUNCTION faults.on_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO faults.moves (tx, at, app, instance, from_state, to_state, live_claims, fenced, term)
	VALUES (txid_current(), clock_timestamp(), current_setting('application_name'), NEW.id, OLD.status, NEW.status,
		(SELECT count(*) FROM demo.orders_claim c WHERE c.instance_id = NEW.id AND c.expires_at > now()),
		CASE WHEN current_setting('application_name') LIKE 'enginehealth/%' THEN EXISTS (SELECT 1 FROM pg_locks l
			WHERE l.locktype = 'relation' AND l.relation = 'enginehealth.leader_term'::regclass AND l.pid = pg_backend_pid()
			  AND l.mode = 'RowShareLock' AND l.granted) END,
		CASE WHEN current_setting('application_name') LIKE 'enginehealth/%' THEN (SELECT term FROM enginehealth.leader_term) END);
	RETURN NULL;
END $$;
CREATE TRIGGER faults_move AFTER UPDATE OF status ON demo.orders
	FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION faults.on_move();
CREATE FUNCTION faults.on_claim() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO faults.claim_ops (tx, app, op, instance, token, node)
		VALUES (txid_current(), current_setting('application_name'), 'insert', NEW.instance_id, NEW.token, NEW.node);
	ELSE
		INSERT INTO faults.claim_ops (tx, app, op, instance, token, node)
		VALUES (txid_current(), current_setting('application_name'), 'delete', OLD.instance_id, OLD.token, OLD.node);
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER faults_claim AFTER INSERT OR DELETE ON demo.orders_claim FOR EACH ROW EXECUTE FUNCTION faults.on_claim();
CREATE FUNCTION faults.on_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO faults.event_tx (event_id, tx) VALUES (NEW.id, txid_current());
	RETURN NULL;
END $$;
CREATE TRIGGER faults_event AFTER INSERT ON enginehealth.events FOR EACH ROW EXECUTE FUNCTION faults.on_event();
-- The attempts rows inserted, by transaction (whether a repair wrote one).
CREATE TABLE faults.attempt_rows (seq bigint NOT NULL DEFAULT nextval('faults.seq'), tx bigint NOT NULL,
	instance text NOT NULL, task text NOT NULL, state text NOT NULL);
CREATE INDEX ON faults.attempt_rows (tx);
CREATE FUNCTION faults.on_attempt_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO faults.attempt_rows (tx, instance, task, state) VALUES (txid_current(), NEW.instance, NEW.task, NEW.state);
	RETURN NULL;
END $$;
CREATE TRIGGER faults_attempt_row AFTER INSERT ON enginehealth.attempts FOR EACH ROW EXECUTE FUNCTION faults.on_attempt_row();
-- The sidecars the suite SIGKILLed, when (written by the suite).
CREATE TABLE faults.kills (seq bigint NOT NULL DEFAULT nextval('faults.seq'), name text NOT NULL);
-- Node records: each one created (from_status NULL), each status change
-- and each deletion (to_status NULL).
CREATE TABLE faults.node_moves (seq bigint NOT NULL DEFAULT nextval('faults.seq'), tx bigint NOT NULL, app text NOT NULL,
	name text NOT NULL, from_status text, to_status text);
CREATE INDEX ON faults.node_moves (name, seq);
CREATE FUNCTION faults.on_node() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO faults.node_moves (tx, app, name, from_status, to_status)
	VALUES (txid_current(), current_setting('application_name'), CASE WHEN TG_OP = 'INSERT' THEN NEW.name ELSE OLD.name END,
		CASE WHEN TG_OP <> 'INSERT' THEN OLD.status END, CASE WHEN TG_OP <> 'DELETE' THEN NEW.status END);
	RETURN NULL;
END $$;
CREATE TRIGGER faults_node_status AFTER UPDATE OF status ON enginehealth.nodes
	FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION faults.on_node();
CREATE TRIGGER faults_node_rows AFTER INSERT OR DELETE ON enginehealth.nodes FOR EACH ROW EXECUTE FUNCTION faults.on_node();
`

func installRecorder(t *testing.T, c *cluster) {
	t.Helper()
	if _, err := c.db.Exec(recorderSQL); err != nil {
		t.Fatalf("install the fault recorder: %v", err)
	}
}

// checkResult is one invariant's verdict.
type checkResult struct {
	name    string
	checked int
	// found: how many violate; violations: the first 20 of them.
	found      int
	violations []string
}

func (c checkResult) summary() string {
	if c.found > 0 {
		return fmt.Sprintf("%d of %d VIOLATE", c.found, c.checked)
	}
	return fmt.Sprintf("ok (%d checked)", c.checked)
}

// termedEvents are the events with the term of the master that wrote
// them: their own, or their run's (instance events name their run).
// master_lost is left out: stepping down is not fenced (a deposed master
// may record it after its successor took office).
const termedEvents = `(SELECT e.id, e.kind, e.actor, coalesce(e.term, r.term) AS term FROM enginehealth.events e
	LEFT JOIN enginehealth.runs r ON r.id = e.run_id WHERE coalesce(e.term, r.term) IS NOT NULL AND e.kind <> 'master_lost') AS te`

// interimList is the SQL list of the fault workflow's interim states.
var interimList = func() string {
	var qs []string
	for _, t := range faultTaskList {
		qs = append(qs, pq.QuoteLiteral(t.interim))
	}
	return "(" + strings.Join(qs, ", ") + ")"
}()

// stuckOrders selects the orders a master should repair: interim,
// without a live claim, not parked by a policy in the state it is in
// (held, or waiting for a retry not overdue by more than 10 s: due
// retries run every pass).
var stuckOrders = `FROM demo.orders o WHERE o.status IN ` + interimList + `
	AND NOT EXISTS (SELECT 1 FROM demo.orders_claim c WHERE c.instance_id = o.id AND c.expires_at > now())
	AND NOT EXISTS (SELECT 1 FROM enginehealth.attempts a WHERE a.workflow = 'orders' AND a.instance = o.id::text
		AND a.left_in = o.status AND (a.state = 'held' OR a.state = 'waiting' AND a.next_attempt_at > now() - interval '10 seconds'))`

// sidecarApp matches the sessions of the sidecars.
const sidecarApp = `app LIKE 'enginehealth/%'`

// check runs every invariant over the record.
func (r *faultRun) check() []checkResult {
	// Its own pool: the record of a long run takes a while to check.
	db, err := pgdb.Open(pgdb.Config{DSN: r.c.dsn, ConnectTimeout: harnessConnectTimeout, StatementTimeout: 10 * time.Minute})
	if err != nil {
		r.t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`ANALYZE faults.moves, faults.claim_ops, faults.event_tx, enginehealth.events, enginehealth.runs, enginehealth.attempts`); err != nil {
		r.t.Fatal(err)
	}
	var out []checkResult
	for _, c := range r.invariants() {
		res := checkResult{name: c.name}
		if err := db.Get(&res.checked, c.count); err != nil {
			r.t.Fatalf("check %q: count: %v", c.name, err)
		}
		var bad []string
		if err := db.Select(&bad, c.bad, c.args...); err != nil {
			r.t.Fatalf("check %q: %v", c.name, err)
		}
		res.found = len(bad)
		for i, b := range bad {
			if i == 20 {
				res.violations = append(res.violations, fmt.Sprintf("%s: … and %d more", c.name, len(bad)-20))
				break
			}
			res.violations = append(res.violations, c.name+": "+b)
		}
		out = append(out, res)
	}
	return out
}

// leaseReport reads the sidecars' logs beside the lease watch.
func (r *faultRun) leaseReport() leaseReport {
	r.mu.Lock()
	var logs []string
	for _, d := range r.incarnations {
		logs = append(logs, d.stderr.String())
	}
	logs = append(logs, r.releaseLogs...) // release-lease revokes a killed sidecar's lease
	r.mu.Unlock()
	return r.leases.report(logs, leaseTTL)
}

// invariant is one check of the record.
type invariant struct {
	name  string
	count string // how many things were checked
	bad   string // one row (text) per violation
	args  []any
}

// invariants lists every check of the record.
func (r *faultRun) invariants() []invariant {
	var begins, interims, tasks []string
	var maxes []int64
	for _, ft := range faultTaskList {
		tasks = append(tasks, ft.name)
		begins = append(begins, ft.begin)
		interims = append(interims, ft.interim)
		maxes = append(maxes, int64(ft.maxAttempts))
	}
	return []invariant{
		{
			"terms never go back (events in the order written)",
			`SELECT count(*) FROM ` + termedEvents,
			`SELECT format('event %s (%s by %s) has term %s after term %s', id, kind, actor, term, before) FROM (
				SELECT id, kind, actor, term, max(term) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
				FROM ` + termedEvents + `) x WHERE term < before`, nil,
		},
		{
			"terms never go back (runs in the order begun)",
			`SELECT count(*) FROM enginehealth.runs`,
			`SELECT format('run %s (%s by %s) has term %s after term %s', id, kind, master, term, before) FROM (
				SELECT id, kind, master, term, max(term) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
				FROM enginehealth.runs) x WHERE term < before`, nil,
		},
		{
			// One election per term, and every run of a term made by
			// the node elected in it.
			"one master per term",
			`SELECT count(*) FROM enginehealth.events WHERE kind = 'master_elected'`,
			`SELECT format('term %s taken by %s', term, string_agg(DISTINCT actor, ', ')) FROM enginehealth.events
				WHERE kind = 'master_elected' GROUP BY term HAVING count(DISTINCT actor) > 1
			 UNION ALL
			 SELECT format('run %s of term %s made by %s, %s', r.id, r.term, r.master,
					coalesce('elected: ' || e.actor, 'no election of that term recorded'))
				FROM enginehealth.runs r LEFT JOIN LATERAL (SELECT e.actor FROM enginehealth.events e
					WHERE e.kind = 'master_elected' AND e.term = r.term LIMIT 1) e ON true
				WHERE e.actor IS DISTINCT FROM r.master`, nil,
		},
		{
			// Each sidecar move is made in a transaction that holds the
			// term row (the fence) and whose events carry the term
			// recorded there: a deposed master's write cannot commit.
			"sidecar moves are fenced by the recorded term",
			`SELECT count(*) FROM faults.moves WHERE ` + sidecarApp,
			`SELECT format('transaction %s moved instances %s: %s', m.tx, m.instances,
					CASE WHEN NOT m.fenced THEN 'without holding the term row'
					ELSE format('under recorded term %s with events of terms %s', m.term, coalesce(e.terms, 'none')) END)
				FROM (SELECT tx, bool_and(fenced) AS fenced, min(term) AS term, string_agg(DISTINCT instance::text, ', ') AS instances
					FROM faults.moves WHERE ` + sidecarApp + ` GROUP BY tx) m
				LEFT JOIN LATERAL (SELECT string_agg(DISTINCT coalesce(e.term, r.term)::text, ', ') AS terms,
						bool_and(coalesce(e.term, r.term) IS NOT DISTINCT FROM m.term) AS same
					FROM faults.event_tx x JOIN enginehealth.events e ON e.id = x.event_id LEFT JOIN enginehealth.runs r ON r.id = e.run_id
					WHERE x.tx = m.tx) e ON true
				WHERE NOT m.fenced OR e.same IS NOT TRUE`, nil,
		},
		{
			"no instance under a live claim was repaired",
			`SELECT count(*) FROM faults.moves WHERE ` + sidecarApp,
			`SELECT format('instance %s moved %s -> %s by %s under %s live claim(s)', instance, from_state, to_state, app, live_claims)
				FROM faults.moves WHERE ` + sidecarApp + ` AND live_claims > 0`, nil,
		},
		{
			// The claim protocol, over every move an engine made: a move
			// into an interim state takes a claim of the engine's own in
			// its transaction; any other move ends one, taken by the
			// instance's previous move (nothing moved it between: no
			// repair, no other engine). A late write (after its claim
			// expired and the instance was repaired), a move without a
			// claim or under another's claim all fail this. Every session
			// that is no sidecar counts as an engine (engine/NAME); one of
			// another name has no claims of its own.
			"no repair overwritten by an engine's late write (engines move only under their own claims)",
			`SELECT count(*) FROM faults.moves WHERE NOT ` + sidecarApp,
			`SELECT format('instance %s moved %s -> %s by %s: %s', f.instance, f.from_state, f.to_state, f.app, f.why) FROM (
				SELECT f.*, CASE
					WHEN f.to_state = ANY ($1) THEN CASE WHEN NOT EXISTS (SELECT 1 FROM faults.claim_ops i
						WHERE i.tx = f.tx AND i.op = 'insert' AND i.instance = f.instance AND i.node = substr(f.app, 8))
						THEN 'no claim of its own taken in its transaction' END
					WHEN d.token IS NULL THEN 'no claim of its own ended in its transaction'
					WHEN p.seq IS NULL OR NOT EXISTS (SELECT 1 FROM faults.claim_ops i WHERE i.tx = p.tx AND i.op = 'insert' AND i.token = d.token)
						THEN format('it ended claim %s, but the move before was %s -> %s by %s', d.token, p.from_state, p.to_state, p.app)
					END AS why
				FROM faults.moves f
				LEFT JOIN LATERAL (SELECT d.token FROM faults.claim_ops d WHERE d.tx = f.tx AND d.op = 'delete' AND d.instance = f.instance
					AND d.node = substr(f.app, 8) LIMIT 1) d ON true
				LEFT JOIN LATERAL (SELECT * FROM faults.moves p WHERE p.instance = f.instance AND p.seq < f.seq ORDER BY p.seq DESC LIMIT 1) p ON true
				WHERE NOT f.` + sidecarApp + `) f
			WHERE f.why IS NOT NULL`,
			[]any{pq.Array(interims)},
		},
		{
			"every sidecar change has exactly one event",
			`SELECT count(*) FROM faults.moves WHERE ` + sidecarApp,
			`SELECT format('instance %s moved %s -> %s by %s with %s events', m.instance, m.from_state, m.to_state, m.app, count(e.id))
				FROM faults.moves m LEFT JOIN (faults.event_tx x JOIN enginehealth.events e ON e.id = x.event_id)
					ON x.tx = m.tx AND e.instance = m.instance::text AND e.to_state = m.to_state
				WHERE m.` + sidecarApp + ` GROUP BY m.seq, m.instance, m.from_state, m.to_state, m.app HAVING count(e.id) <> 1`, nil,
		},
		{
			"every instance event that moves has its move",
			`SELECT count(*) FROM enginehealth.events WHERE instance IS NOT NULL AND to_state IS NOT NULL AND to_state <> from_state AND kind <> 'node_grade'`,
			`SELECT format('event %s (%s) says %s moved %s -> %s, but it moved %s times in its transaction', e.id, e.kind, e.instance,
					e.from_state, e.to_state, (SELECT count(*) FROM faults.moves m WHERE m.tx = x.tx AND m.instance::text = e.instance AND m.to_state = e.to_state))
				FROM enginehealth.events e JOIN faults.event_tx x ON x.event_id = e.id
				WHERE e.instance IS NOT NULL AND e.to_state IS NOT NULL AND e.to_state <> e.from_state AND e.kind <> 'node_grade'
				  AND (SELECT count(*) FROM faults.moves m WHERE m.tx = x.tx AND m.instance::text = e.instance AND m.to_state = e.to_state) <> 1`, nil,
		},
		{
			// A master runs one run at a time: once a later run
			// (of any term) finished, this one must have ended, as
			// finished, failed or interrupted (closed by a later master).
			"every run ended (by its master or a later one)",
			`SELECT count(*) FROM enginehealth.runs`,
			`SELECT format('run %s (%s, term %s) still %s after run %s finished', r.id, r.kind, r.term, r.status, l.id) FROM enginehealth.runs r
				JOIN LATERAL (SELECT l.id FROM enginehealth.runs l WHERE l.id > r.id AND l.status = 'finished' ORDER BY l.id LIMIT 1) l ON true
				WHERE r.status NOT IN ('finished', 'failed', 'interrupted')`, nil,
		},
		{
			// An instance's count: its attempts row's, or, without one,
			// its last retry at once's (they write none).
			"retries numbered 1, 2, … with none counted twice or skipped, none beyond max_attempts",
			`SELECT count(*) FROM (SELECT workflow, instance, task FROM enginehealth.attempts
				UNION SELECT workflow, instance, task FROM enginehealth.events WHERE kind = 'instance_repaired' AND attempt IS NOT NULL) c`,
			`WITH t AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) AS t(task, begin_state, max_attempts)),
			 made AS (
				SELECT e.instance, e.task, array_agg(e.attempt ORDER BY e.id) AS seq
				FROM enginehealth.events e JOIN t ON t.task = e.task
				WHERE e.workflow = 'orders' AND (e.kind = 'instance_retried' OR e.kind = 'instance_repaired' AND e.to_state = t.begin_state)
				GROUP BY 1, 2),
			 counted AS (
				SELECT a.instance, a.task, a.attempt, 'attempts row' AS source FROM enginehealth.attempts a WHERE a.workflow = 'orders'
				UNION ALL
				SELECT e.instance, e.task, max(e.attempt), 'last retry at once' FROM enginehealth.events e
				WHERE e.workflow = 'orders' AND e.kind = 'instance_repaired' AND e.attempt IS NOT NULL
				  AND NOT EXISTS (SELECT 1 FROM enginehealth.attempts a WHERE a.workflow = 'orders' AND a.instance = e.instance AND a.task = e.task)
				GROUP BY 1, 2)
			 SELECT format('orders/%s %s: retries numbered %s, %s %s (max %s)', a.instance, a.task, coalesce(m.seq::text, '{}'), a.source, a.attempt, t.max_attempts)
				FROM counted a JOIN t ON t.task = a.task LEFT JOIN made m ON m.instance = a.instance AND m.task = a.task
				WHERE coalesce(m.seq, '{}') <> coalesce((SELECT array_agg(g ORDER BY g) FROM generate_series(1, a.attempt) g), '{}')
				   OR a.attempt > t.max_attempts`,
			[]any{pq.Array(tasks), pq.Array(begins), pq.Array(maxes)},
		},
		{
			// A waiting retry ends (it runs, is cancelled, or an operator
			// replaces it) and a hold ends (an operator decides) before
			// the instance is parked again: two decisions made on the
			// same attempts row count the same retry twice.
			"an instance is parked (retry scheduled, held) once at a time",
			`SELECT count(*) FROM enginehealth.events WHERE kind IN ('retry_scheduled', 'instance_held')`,
			`SELECT format('orders/%s %s: %s (event %s, attempt %s) while %s (event %s, attempt %s) had not ended', e.instance, e.task,
					e.kind, e.id, e.attempt, p.kind, p.id, p.attempt)
				FROM enginehealth.events e
				JOIN LATERAL (SELECT p.id, p.kind, p.attempt FROM enginehealth.events p
					WHERE p.instance = e.instance AND p.workflow = e.workflow AND p.task = e.task AND p.id < e.id
					  AND p.kind IN ('retry_scheduled', 'instance_held', 'instance_retried', 'retry_cancelled', 'manual_retry', 'hold_decided', 'hold_cancelled')
					ORDER BY p.id DESC LIMIT 1) p ON true
				WHERE e.workflow = 'orders' AND e.kind IN ('retry_scheduled', 'instance_held') AND p.kind IN ('retry_scheduled', 'instance_held')`, nil,
		},
		{
			"a held instance moves only by an operator's decision",
			`SELECT count(*) FROM enginehealth.events WHERE kind = 'instance_held'`,
			// Moves after the hold and before the first decision that
			// followed it, other than the decision's own.
			`SELECT format('held orders/%s (%s) moved %s -> %s by %s before a decision', h.instance, h.task, m.from_state, m.to_state, m.app)
				FROM enginehealth.events h JOIN faults.event_tx hx ON hx.event_id = h.id
				LEFT JOIN LATERAL (SELECT dx.seq, dx.tx FROM enginehealth.events d JOIN faults.event_tx dx ON dx.event_id = d.id
					WHERE d.instance = h.instance AND d.id > h.id AND d.kind IN ('hold_decided', 'manual_retry') ORDER BY d.id LIMIT 1) d ON true
				JOIN faults.moves m ON m.instance::text = h.instance AND m.seq > hx.seq
				WHERE h.kind = 'instance_held' AND (d.seq IS NULL OR m.seq < d.seq AND m.tx <> d.tx)`, nil,
		},
		{
			"decisions on holds are made by operators",
			`SELECT count(*) FROM enginehealth.events WHERE kind IN ('hold_decided', 'manual_retry')`,
			`SELECT format('event %s (%s) by %s', id, kind, actor) FROM enginehealth.events
				WHERE kind IN ('hold_decided', 'manual_retry') AND actor NOT LIKE '% (operator)'`, nil,
		},
		{
			// By the node records' own changes (a trigger), not by the
			// events: each change out of Unexpected shutdown (or deletion
			// of such a record) is made in a transaction that wrote that
			// node's ack.
			"a node leaves Unexpected shutdown only by an ack",
			`SELECT count(*) FROM faults.node_moves WHERE from_status = 'Unexpected shutdown'`,
			`SELECT format('node %s went from Unexpected shutdown to %s (by %s) without an ack in that transaction', m.name,
					coalesce(m.to_status, '(deleted)'), m.app)
				FROM faults.node_moves m WHERE m.from_status = 'Unexpected shutdown'
				  AND NOT EXISTS (SELECT 1 FROM faults.event_tx x JOIN enginehealth.events e ON e.id = x.event_id
					WHERE x.tx = m.tx AND e.kind = 'node_ack' AND e.node = m.name)`, nil,
		},
		{
			// A node killed and restarted must come back through
			// Unexpected shutdown: its first change of its own record
			// after the kill (its registration) takes it there. Unless
			// the database lost that registration (a promotion of a
			// replica that lagged can lose it, and the ack after it,
			// while keeping the suite's earlier kill row): then the
			// node restored its record in the status it last saw, and
			// said so in an event, before its next change or in the
			// restore's own transaction. A node killed while its record
			// was already in Unexpected shutdown (its ack lost with a
			// failover's last transactions, or not given yet) comes back
			// there without a move: its record does not change until an
			// ack takes it out (the invariant above).
			"a killed node comes back in Unexpected shutdown",
			`SELECT count(*) FROM faults.kills`,
			`SELECT format('node %s was killed; its next change of its own record %s', k.name,
					coalesce(format('took it from %s to %s', coalesce(m.from_status, '(none)'), coalesce(m.to_status, '(deleted)')), 'never came'))
				FROM faults.kills k LEFT JOIN LATERAL (SELECT * FROM faults.node_moves m
					WHERE m.name = k.name AND m.seq > k.seq AND m.app = 'enginehealth/' || k.name ORDER BY m.seq LIMIT 1) m ON true
				WHERE m.to_status IS DISTINCT FROM 'Unexpected shutdown'
				  AND (SELECT p.to_status FROM faults.node_moves p WHERE p.name = k.name AND p.seq < k.seq
					ORDER BY p.seq DESC LIMIT 1) IS DISTINCT FROM 'Unexpected shutdown'
				  AND NOT EXISTS (SELECT 1 FROM faults.event_tx x JOIN enginehealth.events e ON e.id = x.event_id
					WHERE e.node = k.name AND e.actor = k.name AND e.reason LIKE '%registration restored:%'
					  AND x.seq > k.seq AND (m.seq IS NULL OR x.seq < m.seq OR x.tx = m.tx))`, nil,
		},
		{
			// By the node records' own changes: no transaction (a pass)
			// marks Not responding as many nodes as the guard's fraction
			// of the records then not in Unexpected shutdown, when there
			// were more than 2. The guard is per pass (nodes that go
			// silent one pass after another are marked one by one).
			"the disruption guard: no pass marks most nodes",
			`SELECT count(DISTINCT tx) FROM faults.node_moves WHERE to_status = 'Not responding'`,
			`WITH mk AS (SELECT tx, min(seq) AS first, count(*) AS marked, string_agg(name, ', ' ORDER BY name) AS names
					FROM faults.node_moves WHERE to_status = 'Not responding' GROUP BY tx),
			 before AS (SELECT mk.tx, count(*) FILTER (WHERE s.to_status <> 'Unexpected shutdown') AS total FROM mk CROSS JOIN LATERAL (
				SELECT DISTINCT ON (n.name) n.name, n.to_status FROM faults.node_moves n WHERE n.seq < mk.first ORDER BY n.name, n.seq DESC) s
				GROUP BY mk.tx)
			 SELECT format('one pass marked %s of %s nodes Not responding: %s', mk.marked, b.total, mk.names)
				FROM mk JOIN before b USING (tx) WHERE b.total > 2 AND mk.marked >= $1::float8 * b.total - 1e-9`,
			[]any{0.55},
		},
		{
			"no instance left interim and unclaimed after the final pass",
			`SELECT count(*) FROM demo.orders`,
			`SELECT format('orders/%s left in %s, unclaimed and not parked', o.id, o.status) ` + stuckOrders, nil,
		},
	}
}

// violated reports whether the invariant named violates already, on the
// record so far (a biting scenario runs until it does).
func (r *faultRun) violated(name string) (bool, error) {
	n, err := r.violationCount(name)
	return n > 0, err
}

// violationCount counts the violations of the invariant named, on the record
// so far.
func (r *faultRun) violationCount(name string) (int, error) {
	for _, c := range r.invariants() {
		if c.name == name {
			var bad []string
			err := r.c.db.Select(&bad, c.bad, c.args...)
			return len(bad), err
		}
	}
	return 0, fmt.Errorf("no invariant %q", name)
}
