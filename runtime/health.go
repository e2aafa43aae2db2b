package runtime

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Health is what a run says about itself to a supervisor (Kubernetes'
// probes): `mqbc run --metrics-addr` serves it as /healthz and /readyz.
//
// A route is starting until its source is open: by then its sinks are
// connected and every start-up premise checked (buildRoute), so a route
// that refuses to start never reads ready. It is ready while it reads,
// ended when its finite source is done, failed when it stopped on an
// error. The run is ready when every route is ready or ended.
type Health struct {
	mu     sync.Mutex
	order  []string
	routes map[string]routeHealth
}

type routeHealth struct {
	state  string // starting, ready, ended, failed
	detail string
}

// NewHealth tracks the routes named, each starting.
func NewHealth(routes []string) *Health {
	h := &Health{routes: map[string]routeHealth{}}
	for _, r := range routes {
		h.order = append(h.order, r)
		h.routes[r] = routeHealth{state: "starting"}
	}
	return h
}

// set records a route's state; a nil Health records nothing.
func (h *Health) set(route, state, detail string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.routes[route]; !ok {
		h.order = append(h.order, route)
	}
	h.routes[route] = routeHealth{state: state, detail: detail}
}

// Ready reports whether every route is ready or ended, and a line per
// route saying where it is.
func (h *Health) Ready() (bool, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ready := len(h.order) > 0
	var lines []string
	for _, name := range h.order {
		r := h.routes[name]
		line := name + ": " + r.state
		if r.detail != "" {
			line += " (" + r.detail + ")"
		}
		lines = append(lines, line)
		ready = ready && (r.state == "ready" || r.state == "ended")
	}
	return ready, lines
}

// handle serves /healthz (the process answers: 200) and /readyz (200 when
// Ready, else 503), each with a line per route.
func (h *Health) handle(mux *http.ServeMux) {
	write := func(w http.ResponseWriter, code int, lines []string) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		fmt.Fprintln(w, strings.Join(lines, "\n"))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, lines := h.Ready()
		write(w, http.StatusOK, append([]string{"ok"}, lines...))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ready, lines := h.Ready()
		if !ready {
			write(w, http.StatusServiceUnavailable, append([]string{"not ready"}, lines...))
			return
		}
		write(w, http.StatusOK, append([]string{"ready"}, lines...))
	})
}
