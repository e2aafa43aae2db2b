package httpserver

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/connector/internal/brokersrc"
	"github.com/mqb-dev/mqb/runtime"
)

// HeaderIdempotencyKey is the header a client stamps each record with,
// the same on every retry of it.
const HeaderIdempotencyKey = "Idempotency-Key"

// idSpace names the UUIDs derived from a client's id that is not a UUID.
var idSpace = uuid.MustParse("5a0c7e1f-93d4-4b2a-8f61-0d7e2c9b4a35")

// serve takes one request: refused at once when it cannot be a record,
// else handed to the route and answered once the route committed past
// it (see answer), or 503 when the route stops first.
func (s *source) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != s.path { // compared as written: a path is no ServeMux pattern
		http.NotFound(w, req)
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "only POST takes a record", http.StatusMethodNotAllowed)
		return
	}
	if s.auth != nil && !s.auth.allows(req) {
		w.Header().Set("WWW-Authenticate", `Basic realm="mqb", charset="UTF-8"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	select {
	case <-s.draining:
		unavailable(w, "the route is stopping")
		return
	default:
	}
	r := &request{committed: make(chan struct{})}
	r.id, r.stamped = requestID(req.Header)
	if !r.stamped && s.producerIDReason != "" {
		http.Error(w, "no "+HeaderIdempotencyKey+" or "+runtime.HeaderMessageID+" header: this route's proof rests on the client's id ("+s.producerIDReason+")", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, s.maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			http.Error(w, err.Error()+" (max_body_bytes)", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if s.format == "json" && !json.Valid(body) {
		http.Error(w, "the body is not one JSON document (format = json)", http.StatusBadRequest)
		return
	}
	r.payload = body
	select {
	case s.in <- r:
	case <-s.draining:
		unavailable(w, "the route is stopping")
		return
	case <-req.Context().Done():
		return // the client went away before the route took the record
	}
	select {
	case <-r.committed:
		s.answer(w, r)
	case <-s.closed:
		select {
		case <-r.committed: // the last commit, just before Close
			s.answer(w, r)
		default:
			unavailable(w, "the route stopped before committing the record; send it again")
		}
	}
}

func unavailable(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, why, http.StatusServiceUnavailable)
}

// requestID reads the client's id for the record: mq_bridge.message_id
// (what an mqb http sink sends), else Idempotency-Key.
func requestID(h http.Header) (uuid.UUID, bool) {
	if id, ok := brokersrc.MessageID(idSpace, h.Get(runtime.HeaderMessageID)); ok {
		return id, true
	}
	return brokersrc.MessageID(idSpace, h.Get(HeaderIdempotencyKey))
}
