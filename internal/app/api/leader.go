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
)

// errBusy means no database slot came free in time.
var errBusy = errors.New("busy")

// ErrNoActingMaster means no node acts as master now.
var ErrNoActingMaster = errors.New("no acting master")

// Budgets of a leader lookup: it answers within a second even when etcd
// or a node does not. The candidates' lookup (the database) may take all
// of lookupBudget but askFloor (with the wait for a database slot, the
// whole stays under a second), the asks whatever it left: on a starved
// host the database read alone outran a fixed 400 ms (twice in one day's
// fresh-clone test runs: a standby refused an operator's request it could
// have forwarded), where the nodes' answers take milliseconds.
const (
	lookupBudget = 850 * time.Millisecond
	askFloor     = 250 * time.Millisecond
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
func (h *handler) acting(r *http.Request) (apitype.Leader, error) {
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
	release, ok := h.slots.acquire(ctx, leaderWait)
	if !ok {
		return apitype.Leader{}, errBusy
	}
	defer release()
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, lookupBudget-askFloor)
	// Bounded by the budget even when the database does not answer.
	cands, err := pgdb.Await(cctx, h.cfg.Candidates)
	cancel()
	if err != nil {
		h.reqLog(r).WarnContext(ctx, "looking up the master", "err", err.Error())
		if len(cands) == 0 {
			reasons = append(reasons, "cannot tell which node took office (logged under this request id)")
		}
	}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		found *apitype.Leader
	)
	actx, acancel := context.WithDeadline(ctx, start.Add(lookupBudget))
	defer acancel()
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
	l, err := h.acting(r)
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
