// Liveness and readiness: GET /healthz and /readyz.

package api

import (
	"net/http"

	"github.com/enginehealth/enginehealth/internal/app/api/apitype"
)

func (h *handler) healthz(w http.ResponseWriter, _ *http.Request) {
	res := apitype.Health{Status: "ok", Checks: map[string]string{}}
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
