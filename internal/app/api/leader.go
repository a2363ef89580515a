package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
	"github.com/enginehealth/enginehealth/internal/infra/pgdb"
	"github.com/enginehealth/enginehealth/leader"
)

// errBusy means no database slot came free in time.
var errBusy = errors.New("busy")

// ErrNoActingMaster means no node acts as master now.
var ErrNoActingMaster = errors.New("no acting master")

// lookup bounds a leader lookup: the wait for a database slot, the whole
// lookup, and the part of it kept for asking the candidates (the
// candidates' lookup, which reads the database and etcd, may use the
// rest; the nodes' answers take milliseconds).
type lookup struct {
	slot, total, askFloor time.Duration
}

var (
	// leaderLookup answers GET /v1/leader and the status page within a
	// second, even when etcd or a node does not.
	leaderLookup = lookup{slot: leaderWait, total: 850 * time.Millisecond, askFloor: 250 * time.Millisecond}
	// forwardLookup finds the master for an operator's mutation sent to a
	// standby. The operator waits for the mutation anyway: on a starved
	// host the database read alone outran the second of leaderLookup
	// (fresh-clone test runs: a standby refused 503 "no acting master" a
	// request it could have forwarded), so a mutation waits up to 5 s
	// rather than be refused.
	forwardLookup = lookup{slot: dbWait, total: 5 * time.Second, askFloor: time.Second}
)

// noMaster is why no node acts, for the answer's detail.
type noMaster struct{ reasons []string }

func (e *noMaster) Error() string {
	return ErrNoActingMaster.Error() + ": " + strings.Join(e.reasons, "; ")
}

func (e *noMaster) Unwrap() error { return ErrNoActingMaster }

// acting finds the acting master: this node if it acts, else the first
// candidate whose own state says it acts. Failures to look candidates up
// are logged under the request's id, not answered: they may carry
// database text.
func (h *handler) acting(r *http.Request, b lookup) (apitype.Leader, error) {
	ctx := r.Context()
	l, err := h.cfg.Local()
	if err == nil {
		l.AnsweredBy = h.cfg.Self
		return l, nil
	}
	reasons := []string{h.cfg.Self + ": " + err.Error()}
	if h.cfg.Candidates == nil {
		return apitype.Leader{}, &noMaster{reasons}
	}
	// Looking the master up reads the database: it takes a slot, briefly.
	release, ok := h.slots.acquire(ctx, b.slot)
	if !ok {
		return apitype.Leader{}, errBusy
	}
	defer release()
	start := time.Now()
	actx, acancel := context.WithDeadline(ctx, start.Add(b.total))
	defer acancel()
	// The candidates' lookup answers with what it has by its deadline;
	// Await bounds it by the whole budget even when it does not.
	cctx, cancel := context.WithTimeout(ctx, b.total-b.askFloor)
	cands, err := pgdb.Await(actx, func(context.Context) ([]leader.Candidate, error) { return h.cfg.Candidates(cctx) })
	cancel()
	switch {
	case err != nil && len(cands) == 0:
		h.reqLog(r).WarnContext(ctx, "looking up the master", "err", err.Error(), "took", time.Since(start).Round(time.Millisecond))
		reasons = append(reasons, "cannot tell which node took office (logged under this request id)")
	case err != nil:
		h.reqLog(r).DebugContext(ctx, "looking up the master: in part", "err", err.Error(), "took", time.Since(start).Round(time.Millisecond))
	}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		found *apitype.Leader
	)
	seen := map[string]bool{h.cfg.Self: true}
	for _, c := range cands {
		if seen[c.Name] || c.APIAddress == "" {
			continue
		}
		seen[c.Name] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := h.askLocal(actx, c.APIAddress, requestID(ctx))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				reasons = append(reasons, c.Name+": "+err.Error())
			case found == nil:
				found = &l
				acancel() // enough: the others need not answer
			}
		}()
	}
	wg.Wait()
	if found != nil {
		return *found, nil
	}
	return apitype.Leader{}, &noMaster{reasons}
}

// askLocal asks the node at addr for its own view (GET /v1/leader?local=true).
func (h *handler) askLocal(ctx context.Context, addr, id string) (apitype.Leader, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, URL(addr, "/v1/leader?local=true"), nil)
	if err != nil {
		return apitype.Leader{}, err
	}
	req.Header.Set(requestIDHeader, id)
	resp, err := h.cfg.Forward.Do(req)
	if err != nil {
		return apitype.Leader{}, fmt.Errorf("not reachable at %s", addr)
	}
	defer func() { _ = resp.Body.Close() }() // closing a response body: nothing to act on
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return apitype.Leader{}, fmt.Errorf("read answer of %s: %v", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb apitype.ErrorBody
		if json.Unmarshal(body, &eb) == nil && eb.Error != "" {
			return apitype.Leader{}, errors.New(cmp.Or(eb.Detail, eb.Error))
		}
		return apitype.Leader{}, fmt.Errorf("answered %d", resp.StatusCode)
	}
	var l apitype.Leader
	if err := json.Unmarshal(body, &l); err != nil {
		return apitype.Leader{}, fmt.Errorf("bad answer of %s: %v", addr, err)
	}
	return l, nil
}

func (h *handler) leader(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	local, given := q.Get("local"), q.Has("local")
	if given && local == "" {
		// ?local or ?local=: a poller that meant true would otherwise see
		// every node answer as if it were the master.
		writeProblem(w, http.StatusBadRequest, "query parameter local: want true or false", "given without a value")
		return
	}
	switch local {
	case "true":
		l, err := h.cfg.Local()
		if err != nil {
			writeProblem(w, http.StatusServiceUnavailable, "not the acting master", err.Error())
			return
		}
		l.AnsweredBy = h.cfg.Self
		writeJSON(w, http.StatusOK, l)
		return
	case "", "false":
	default:
		writeProblem(w, http.StatusBadRequest, "query parameter local: want true or false", "got "+strconv.Quote(local))
		return
	}
	l, err := h.acting(r, leaderLookup)
	var nm *noMaster
	switch {
	case errors.Is(err, errBusy):
		h.busy(w, r)
	case errors.As(err, &nm):
		writeProblem(w, http.StatusServiceUnavailable, ErrNoActingMaster.Error(), strings.Join(nm.reasons, "; "))
	case err != nil:
		h.internal(w, r, err)
	default:
		writeJSON(w, http.StatusOK, l)
	}
}
