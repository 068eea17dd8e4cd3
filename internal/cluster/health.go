package cluster

import (
	"encoding/json"
	"net/http"
)

// HealthHandler answers a worker's probes (braid worker --health-listen):
// GET /health is 200 while the process serves, with its Status (a
// coordinator's session, the rank and model it holds); GET /ready is 200
// while it accepts coordinators, 503 once it is leaving. Neither touches
// the session or the data plane, so probing never disturbs a coordinator.
func (w *Worker) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	reply := func(rw http.ResponseWriter, code int, v any) {
		rw.Header().Set("Content-Type", "application/json")
		rw.Header().Set("Cache-Control", "no-store")
		rw.WriteHeader(code)
		json.NewEncoder(rw).Encode(v)
	}
	get := func(h func(http.ResponseWriter)) http.HandlerFunc {
		return func(rw http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				rw.Header().Set("Allow", "GET, HEAD")
				reply(rw, http.StatusMethodNotAllowed, map[string]string{"error": r.Method + " is not allowed on " + r.URL.Path})
				return
			}
			h(rw)
		}
	}
	mux.HandleFunc("/health", get(func(rw http.ResponseWriter) {
		reply(rw, http.StatusOK, struct {
			Status string `json:"status"`
			WorkerStatus
		}{"ok", w.Status()})
	}))
	mux.HandleFunc("/ready", get(func(rw http.ResponseWriter) {
		if w.Status().Leaving {
			reply(rw, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "leaving: the worker is stopping"})
			return
		}
		reply(rw, http.StatusOK, map[string]string{"status": "ready"})
	}))
	mux.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) {
		reply(rw, http.StatusNotFound, map[string]string{"error": "no endpoint " + r.URL.Path + "; try /health or /ready"})
	})
	return mux
}
