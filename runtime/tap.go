package runtime

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Tap lets a person watch records flow through a running route, like
// `vector tap`: `mqbc run --metrics-addr` serves it at /tap, `mqbc tap`
// reads it. A route's tap points are `source` (each record as read, after
// decoding), each input step by kind (`filter`, `map`, `map#2` for the
// second map…: the records still live after it), and `sink` (what the
// sink is handed). A watcher gets JSON lines; one that reads too slowly
// misses records rather than slowing the route, and a route nobody taps
// pays one atomic load per batch.
type Tap struct {
	mu     sync.Mutex
	points map[string][]string // route → its points, in order
	subs   map[*tapSub]struct{}
	active atomic.Int32 // len(subs)
}

type tapSub struct {
	route, at string
	ch        chan []byte
	dropped   atomic.Int64
}

// NewTap returns a tap with no routes yet; Run adds each route it builds.
func NewTap() *Tap {
	return &Tap{points: map[string][]string{}, subs: map[*tapSub]struct{}{}}
}

func (t *Tap) addRoute(route string, points []string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.points[route] = points
}

// watching reports whether anyone taps any route at all (cheap enough for
// every batch).
func (t *Tap) watching() bool { return t != nil && t.active.Load() > 0 }

// send offers the live records among recs to the watchers of route at
// the point at.
func (t *Tap) send(route, at string, recs []*Record) {
	t.mu.Lock()
	var subs []*tapSub
	for s := range t.subs {
		if s.route == route && s.at == at {
			subs = append(subs, s)
		}
	}
	t.mu.Unlock()
	if len(subs) == 0 {
		return
	}
	for _, r := range recs {
		if r.state != stLive {
			continue
		}
		line := tapLine(route, at, r)
		for _, s := range subs {
			select {
			case s.ch <- line:
			default:
				s.dropped.Add(1)
			}
		}
	}
}

// sendBatch is send over a batch's records.
func (t *Tap) sendBatch(route, at string, b *batch) {
	recs := make([]*Record, len(b.recs))
	for i := range b.recs {
		recs[i] = &b.recs[i]
	}
	t.send(route, at, recs)
}

// tapLine renders a record for a watcher: where it was seen, its position,
// its metadata and its payload (JSON as it is, anything else as a string).
func tapLine(route, at string, r *Record) []byte {
	payload := json.RawMessage(r.Payload)
	if r.dirty {
		if b, err := marshalPayload(r.value); err == nil {
			payload = b
		}
	} else if !json.Valid(r.Payload) {
		payload, _ = json.Marshal(string(r.Payload))
	}
	b, err := json.Marshal(struct {
		Route     string            `json:"route"`
		At        string            `json:"at"`
		Partition int32             `json:"partition"`
		Position  uint64            `json:"position"`
		Meta      map[string]string `json:"meta,omitempty"`
		Payload   json.RawMessage   `json:"payload"`
	}{route, at, r.Partition, r.Seq, r.metaView(), payload})
	if err != nil {
		b = []byte(fmt.Sprintf(`{"route":%q,"at":%q,"error":%q}`, route, at, err.Error()))
	}
	return append(b, '\n')
}

// handle serves GET /tap?route=R&at=POINT[&limit=N]: a first line saying
// what is tapped and the route's points, then a line per record until the
// client goes away or limit records were sent.
func (t *Tap) handle(mux *http.ServeMux) {
	mux.HandleFunc("/tap", func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		route, at := q.Get("route"), q.Get("at")
		if at == "" {
			at = "sink"
		}
		limit, _ := strconv.Atoi(q.Get("limit"))
		t.mu.Lock()
		points, ok := t.points[route]
		var routes []string
		for r := range t.points {
			routes = append(routes, r)
		}
		t.mu.Unlock()
		if !ok {
			http.Error(w, fmt.Sprintf("no route %q is running here; routes: %s", route, strings.Join(routes, ", ")), http.StatusNotFound)
			return
		}
		found := false
		for _, p := range points {
			found = found || p == at
		}
		if !found {
			http.Error(w, fmt.Sprintf("route %s has no tap point %q; its points: %s", route, at, strings.Join(points, ", ")), http.StatusNotFound)
			return
		}
		flusher, _ := w.(http.Flusher)
		sub := &tapSub{route: route, at: at, ch: make(chan []byte, 256)}
		t.mu.Lock()
		t.subs[sub] = struct{}{}
		t.active.Add(1)
		t.mu.Unlock()
		defer func() {
			t.mu.Lock()
			delete(t.subs, sub)
			t.active.Add(-1)
			t.mu.Unlock()
		}()
		w.Header().Set("Content-Type", "application/x-ndjson")
		head, _ := json.Marshal(map[string]any{"tapping": route, "at": at, "points": points})
		w.Write(append(head, '\n'))
		if flusher != nil {
			flusher.Flush()
		}
		sent := 0
		for {
			select {
			case <-req.Context().Done():
				return
			case line := <-sub.ch:
				if _, err := w.Write(line); err != nil {
					return
				}
				if flusher != nil {
					flusher.Flush()
				}
				if sent++; limit > 0 && sent >= limit {
					return
				}
			}
		}
	})
}
