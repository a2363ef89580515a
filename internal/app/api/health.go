// Liveness and readiness: GET /healthz and /readyz.

package api

import (
	"net/http"

	"github.com/enginehealth/enginehealth/internal/infra/jsonx"
)

// Ready is the body of GET /readyz.
type Ready struct {
	Ready  bool   `json:"ready"`
	Status string `json:"status"`
	// Grade is the node's failover grade (an ERROR node is not ready with
	// failover.error_not_ready); null before the node's first heartbeat
	// read it.
	Grade string `json:"grade" null:"zero"`
	// Reason says why the node is not ready; null when it is.
	Reason string `json:"reason" null:"zero"`
}

// MarshalJSON sends every field, null when it has no value (jsonx).
func (r Ready) MarshalJSON() ([]byte, error) { return jsonx.Marshal(r) }

// Health is the body of /healthz.
type Health struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

func (h *handler) healthz(w http.ResponseWriter, _ *http.Request) {
	res := Health{Status: "ok", Checks: map[string]string{}}
	code := http.StatusOK
	for _, c := range h.cfg.Live {
		if err := c.Check(); err != nil {
			res.Status, code = "unhealthy", http.StatusServiceUnavailable
			res.Checks[c.Name] = err.Error()
		} else {
			res.Checks[c.Name] = "ok"
		}
	}
	writeJSON(w, code, res)
}

func (h *handler) readyz(w http.ResponseWriter, _ *http.Request) {
	rd := h.cfg.Ready()
	code := http.StatusOK
	if !rd.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, rd)
}
