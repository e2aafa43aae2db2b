package httpserver

import (
	"bytes"
	"net/http"
	"sort"
	"strings"

	"github.com/mqb-dev/mqb/connector/internal/metaheader"
	"github.com/mqb-dev/mqb/runtime"
)

// The reply's meta a response carries, an allow-list: meta["mqb.id"] as
// Mqb-Id, and each key the route set under meta["reply.<name>"] as
// Mqb-Reply-<name> (metaheader's encoding). No other key is sent: the
// names never clash with the headers that frame the response, and nothing
// the route did not put there on purpose goes back to the client.
const (
	metaReplyPrefix   = "reply."
	replyHeaderPrefix = "Mqb-Reply-"
	headerID          = "Mqb-Id"
	metaID            = "mqb.id"
)

// replyHeaders are the response headers for a reply's meta (nil: none).
func replyHeaders(meta map[string]string) http.Header {
	var h http.Header
	set := func(name, v string) {
		if h == nil {
			h = http.Header{}
		}
		h[name] = []string{metaheader.Value(v)} // as written: Set would canonicalise
	}
	if id, ok := meta[metaID]; ok {
		set(headerID, id)
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		if name, ok := strings.CutPrefix(k, metaReplyPrefix); ok && name != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		set(metaheader.Name(replyHeaderPrefix, strings.TrimPrefix(k, metaReplyPrefix)), meta[k])
	}
	return h
}

// replyingSource is the http_server source under request_reply: the
// engine sees it is a runtime.Replier and hands it the reply of every
// record the route delivered, which the request is answered with (200)
// once the route committed past the record.
type replyingSource struct{ *source }

// Reply keeps each delivered record's final payload with its request.
// The engine calls it before it acks the records, so a reply is in place
// before Commit answers its request.
func (s *replyingSource) Reply(replies []runtime.Reply) {
	s.replyMu.Lock()
	defer s.replyMu.Unlock()
	for _, rp := range replies {
		r := s.replies[rp.Seq]
		if r == nil || rp.Partition != 0 {
			continue // not a record this run handed out
		}
		if rp.Kids == 0 {
			r.reply, r.multi, r.header = [][]byte{rp.Payload}, false, replyHeaders(rp.Meta)
			continue
		}
		if len(r.reply) != int(rp.Kids) {
			r.reply = make([][]byte, rp.Kids)
		}
		if rp.Kid < rp.Kids {
			r.reply[rp.Kid], r.multi = rp.Payload, true
		}
	}
}

// answer tells the client the route committed past its record: 200 with
// the route's reply when the route delivered it and request_reply is on;
// otherwise (filtered, a repeat, dead-lettered, or no request_reply) 204.
// An unnest's elements come back one per line, in order, as NDJSON, with
// no meta headers (each element has its own meta). A single reply carries
// its meta's allow-listed keys as headers (replyHeaders).
func (s *source) answer(w http.ResponseWriter, r *request) {
	body, ctype, ok := replyBody(r, s.format)
	if !ok {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !r.multi {
		for name, v := range r.header {
			w.Header()[name] = v
		}
	}
	w.Header().Set("Content-Type", ctype)
	w.WriteHeader(http.StatusOK)
	w.Write(body) // the client gone now changes nothing: the record is committed
}

// replyBody is the response body of r's reply and its Content-Type; ok
// is false when the route delivered nothing of r.
func replyBody(r *request, format string) (body []byte, ctype string, ok bool) {
	if !r.multi {
		if len(r.reply) != 1 {
			return nil, "", false
		}
		return r.reply[0], contentType(r.reply[0], format), true
	}
	var b bytes.Buffer
	for _, p := range r.reply {
		if p != nil {
			b.Write(p)
			b.WriteByte('\n')
		}
	}
	if b.Len() == 0 {
		return nil, "", false
	}
	return b.Bytes(), "application/x-ndjson", true
}

// contentType names a reply payload's type: JSON for a json route (a
// map step keeps the payload JSON), else as net/http sniffs it.
func contentType(payload []byte, format string) string {
	if format == "json" {
		return "application/json"
	}
	return http.DetectContentType(payload)
}
