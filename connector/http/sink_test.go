package http

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	nethttp "net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	_ "github.com/mqb-dev/mqb/connector/structural" // the request and switch of the routes below
	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// httpHit is one request an httpServer received.
type httpHit struct {
	method, path, query string
	rawPath             string // the path as sent, escapes kept
	header              nethttp.Header
	body                string
}

// httpServer is a real HTTP server on 127.0.0.1 that records every request
// and answers with respond (200 and an empty body when nil).
type httpServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits []httpHit
}

func newHTTPServer(t *testing.T, respond func(n int, h httpHit, w nethttp.ResponseWriter)) *httpServer {
	t.Helper()
	s := &httpServer{}
	s.Server = httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(nethttp.StatusBadRequest)
			return
		}
		h := httpHit{method: r.Method, path: r.URL.Path, rawPath: r.URL.EscapedPath(), query: r.URL.RawQuery, header: r.Header.Clone(), body: string(body)}
		s.mu.Lock()
		s.hits = append(s.hits, h)
		n := len(s.hits)
		s.mu.Unlock()
		if respond != nil {
			respond(n, h, w)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *httpServer) received() []httpHit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]httpHit(nil), s.hits...)
}

// orderIDOf reads order_id from a JSON body.
func orderIDOf(t *testing.T, body string) string {
	t.Helper()
	var o struct {
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal([]byte(body), &o); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	return o.OrderID
}

const httpRouteSrc = `
route post_orders {
  batch_size  = 50
  concurrency = 2
  from file { path = "orders.jsonl" }
  id payload.order_id
  retry { attempts = %d, backoff = 10ms, max_backoff = 50ms }
  dlq { to file { path = "dlq.jsonl" } }
  to http {
    url     = "%s/orders/${payload.order_id}"
    method  = %s
    timeout = %s
  }
}
`

// TestHTTPSinkDelivers sends every record as one request: the templated
// url, the method, the payload as the JSON body, the message_id header and
// the forwarded meta as Mqb-Meta-* headers.
func TestHTTPSinkDelivers(t *testing.T) {
	for _, method := range []string{"POST", "PUT"} {
		t.Run(method, func(t *testing.T) {
			srv := newHTTPServer(t, nil)
			dir := t.TempDir()
			const n = 300
			lines := plantest.WriteOrders(t, filepath.Join(dir, "orders.jsonl"), n)
			st := runtest.RunIn(t, dir, plantest.Compile(t, fmt.Sprintf(httpRouteSrc, 1, srv.URL, method, "5s"))).Route("post_orders")
			if st.In != n || st.Out != n || st.DeadLettered != 0 {
				t.Fatalf("stats %+v, want in = out = %d", st, n)
			}
			want := map[string]string{}
			for _, l := range lines {
				want[orderIDOf(t, l)] = l
			}
			ids := map[string]bool{}
			hits := srv.received()
			if len(hits) != n {
				t.Errorf("%d requests, want %d", len(hits), n)
			}
			for _, h := range hits {
				id := orderIDOf(t, h.body)
				if want[id] != h.body {
					t.Errorf("unexpected or repeated body %s", h.body)
				}
				delete(want, id)
				if h.method != method {
					t.Errorf("method %s, want %s", h.method, method)
				}
				if h.path != "/orders/"+id {
					t.Errorf("path %s, want /orders/%s", h.path, id)
				}
				if ct := h.header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				if got := h.header.Get("Mqb-Meta-mqb.id"); got != id {
					t.Errorf("header Mqb-Meta-mqb.id = %q, want %s", got, id)
				}
				mid := h.header.Get(runtime.HeaderMessageID)
				if u, err := uuid.Parse(mid); err != nil || len(mid) != 36 {
					t.Errorf("header %s = %q: want a UUID (%v)", runtime.HeaderMessageID, mid, err)
				} else if ids[u.String()] {
					t.Errorf("message_id %s on two requests", u)
				} else {
					ids[u.String()] = true
				}
				for k := range h.header {
					if strings.HasPrefix(strings.ToLower(k), "mqb-meta-mqb.src.") {
						t.Errorf("provenance meta forwarded: %s", k)
					}
				}
			}
			if len(want) != 0 {
				t.Errorf("%d orders never arrived", len(want))
			}
		})
	}
}

// TestHTTPSinkResponses: a refusing status fails its record alone (to the
// DLQ, with the status and the body's start); 503 and 429 fail the batch,
// which the retry step sends again until everything arrives.
func TestHTTPSinkResponses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		respond func(n int, h httpHit, w nethttp.ResponseWriter)
		dead    map[string]string // order id → text its DLQ reason must hold
		retried bool              // some requests were answered with a retryable status
	}{
		{
			name: "400 dead-letters one record",
			respond: func(_ int, h httpHit, w nethttp.ResponseWriter) {
				if h.path == "/orders/o-7" {
					w.WriteHeader(nethttp.StatusBadRequest)
					io.WriteString(w, `{"error": "amount must be positive"}`)
				}
			},
			dead: map[string]string{"o-7": `400 Bad Request: {"error": "amount must be positive"}`},
		},
		{
			name: "404 and a redirect dead-letter their records",
			respond: func(_ int, h httpHit, w nethttp.ResponseWriter) {
				switch h.path {
				case "/orders/o-3":
					nethttp.Error(w, "no such order", nethttp.StatusNotFound)
				case "/orders/o-4":
					w.Header().Set("Location", "/elsewhere?token=abcdefghijkl")
					w.WriteHeader(nethttp.StatusFound)
				}
			},
			dead: map[string]string{
				"o-3": "404 Not Found: no such order",
				"o-4": "302 Found (redirects are not followed; Location: /elsewhere?token=xxxxx)",
			},
		},
		{
			name: "503 then 200 is retried",
			respond: func(n int, _ httpHit, w nethttp.ResponseWriter) {
				if n <= 20 {
					nethttp.Error(w, "try later", nethttp.StatusServiceUnavailable)
				}
			},
			retried: true,
		},
		{
			name: "429 and 408 are retried",
			respond: func(n int, _ httpHit, w nethttp.ResponseWriter) {
				switch {
				case n <= 3:
					w.WriteHeader(nethttp.StatusTooManyRequests)
				case n <= 6:
					w.WriteHeader(nethttp.StatusRequestTimeout)
				}
			},
			retried: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newHTTPServer(t, tc.respond)
			dir := t.TempDir()
			const n = 120
			lines := plantest.WriteOrders(t, filepath.Join(dir, "orders.jsonl"), n)
			st := runtest.RunIn(t, dir, plantest.Compile(t, fmt.Sprintf(httpRouteSrc, 10, srv.URL, "POST", "5s"))).Route("post_orders")
			if st.In != n || st.Out != int64(n-len(tc.dead)) || st.DeadLettered != int64(len(tc.dead)) {
				t.Errorf("stats %+v, want in %d, out %d, dead-lettered %d", st, n, n-len(tc.dead), len(tc.dead))
			}
			// Every order reached the server, at least once; the ones it
			// took (2xx) once each unless a retry repeated its batch.
			got := map[string]int{}
			for _, h := range srv.received() {
				got[orderIDOf(t, h.body)]++
			}
			for _, l := range lines {
				id := orderIDOf(t, l)
				if got[id] == 0 {
					t.Errorf("order %s never arrived", id)
				} else if got[id] > 1 && !tc.retried {
					t.Errorf("order %s arrived %d times without a retry", id, got[id])
				}
			}
			if tc.retried && len(srv.received()) <= n {
				t.Errorf("%d requests: the retryable answers were not retried", len(srv.received()))
			}
			dlq := plantest.ReadDLQLines(t, filepath.Join(dir, "dlq.jsonl"))
			if len(dlq) != len(tc.dead) {
				t.Errorf("%d DLQ lines, want %d: %v", len(dlq), len(tc.dead), dlq)
			}
			for _, d := range dlq {
				id := orderIDOf(t, string(d.Payload))
				want, ok := tc.dead[id]
				if !ok {
					t.Errorf("order %s in the DLQ: %s", id, d.Error)
					continue
				}
				if !strings.Contains(d.Error, want) || !strings.Contains(d.Error, "/orders/"+id) {
					t.Errorf("order %s: DLQ reason %q, want it to name the url and hold %q", id, d.Error, want)
				}
			}
		})
	}
}

// newTestHTTPSink builds an http sink for a JSON route from attributes,
// through the registry as a route does.
func newTestHTTPSink(t *testing.T, attrs map[string]plan.Value, log *slog.Logger) *httpSink {
	t.Helper()
	node := &plan.Node{ID: "n1", Role: plan.RoleSink, Kind: "http", Attrs: attrs}
	s, err := runtime.BuildSink(context.Background(), "post", "json", node, runtime.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*httpSink)
}

// testRecord is a record read as payload, decoded as value.
func testRecord(payload string, value any) *runtime.Record {
	r := &runtime.Record{}
	r.SetPayload([]byte(payload), value)
	return r
}

// TestHTTPSinkTimeout: a server slower than timeout fails the write
// retryably, and the route's retry then delivers everything.
func TestHTTPSinkTimeout(t *testing.T) {
	var slow sync.Map // path → already slowed once
	srv := newHTTPServer(t, func(_ int, h httpHit, w nethttp.ResponseWriter) {
		if _, done := slow.LoadOrStore(h.path, true); !done {
			time.Sleep(400 * time.Millisecond)
		}
	})
	s := newTestHTTPSink(t, map[string]plan.Value{"url": plantest.Tmpl(plantest.Lit(srv.URL+"/slow/"), plantest.Ex("payload.i")), "timeout": plantest.Str("100ms")}, nil)
	recs := []*runtime.Record{testRecord(`{"i":1}`, map[string]any{"i": int64(1)}), testRecord(`{"i":2}`, map[string]any{"i": int64(2)})}
	err := s.Write(context.Background(), recs)
	if err == nil || !runtime.IsRetryable(err) {
		t.Fatalf("err %v, want a retryable error", err)
	}
	if !strings.Contains(err.Error(), "no response within the 100ms timeout") || !strings.Contains(err.Error(), "POST "+srv.URL+"/slow/") {
		t.Errorf("err %q, want it to name the request and the timeout", err)
	}
	// Now answered in time: the retry succeeds.
	if err := s.Write(context.Background(), recs); err != nil {
		t.Fatalf("second write: %v", err)
	}

	// Through a route: the first request of each order is too slow.
	dir := t.TempDir()
	srv2 := newHTTPServer(t, func(_ int, h httpHit, w nethttp.ResponseWriter) {
		if _, done := slow.LoadOrStore("route"+h.path, true); !done && h.path == "/orders/o-2" {
			time.Sleep(400 * time.Millisecond)
		}
	})
	plantest.WriteOrders(t, filepath.Join(dir, "orders.jsonl"), 10)
	st := runtest.RunIn(t, dir, plantest.Compile(t, fmt.Sprintf(httpRouteSrc, 3, srv2.URL, "POST", "100ms"))).Route("post_orders")
	if st.Out != 10 {
		t.Errorf("stats %+v, want out 10", st)
	}
}

// TestHTTPSinkSecretURL: the url's password and token never appear in the
// route's error, its logs or the DLQ, even when the server echoes them.
func TestHTTPSinkSecretURL(t *testing.T) {
	const password, token, pathToken = "pa55-w0rd-secret", "t0ken-very-secret", "h00k-path-secret"
	t.Setenv("MQB_TEST_HOOK_TOKEN", pathToken)
	for _, status := range []int{nethttp.StatusServiceUnavailable, nethttp.StatusForbidden} {
		t.Run(nethttp.StatusText(status), func(t *testing.T) {
			srv := newHTTPServer(t, func(_ int, h httpHit, w nethttp.ResponseWriter) {
				w.WriteHeader(status)
				fmt.Fprintf(w, "denied %s?%s auth=%s", h.path, h.query, h.header.Get("Authorization"))
			})
			dir := t.TempDir()
			plantest.WriteOrders(t, filepath.Join(dir, "orders.jsonl"), 5)
			secretURL := strings.Replace(srv.URL, "http://", "http://mqb:"+password+"@", 1) + `/hook/${env("MQB_TEST_HOOK_TOKEN")}`
			src := fmt.Sprintf(httpRouteSrc, 2, secretURL, "POST", "5s")
			src = strings.Replace(src, "/orders/${payload.order_id}", "/orders/${payload.order_id}?token="+token, 1)
			var logs bytes.Buffer
			opts := runtest.Options()
			opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			opts.BaseDir, opts.StateDir = dir, filepath.Join(dir, "state")
			_, err := runtime.Run(context.Background(), plantest.Compile(t, src), opts)
			dlq, _ := os.ReadFile(filepath.Join(dir, "dlq.jsonl"))
			var shown string
			if status == nethttp.StatusServiceUnavailable {
				if err == nil {
					t.Fatal("run succeeded against a server answering 503")
				}
				shown = err.Error()
			} else {
				if err != nil {
					t.Fatal(err)
				}
				shown = string(dlq)
			}
			if !strings.Contains(shown, "mqb:xxxxx@") || !strings.Contains(shown, "token=xxxxx") {
				t.Errorf("want the redacted url in %q", shown)
			}
			if !strings.Contains(shown, "/hook/xxxxx/orders/o-") || !strings.Contains(shown, "denied /hook/xxxxx/orders/o-") {
				t.Errorf("want the response snippet in %q", shown)
			}
			for _, where := range []struct{ name, text string }{{"error", fmt.Sprint(err)}, {"logs", logs.String()}, {"dlq", string(dlq)}} {
				for _, secret := range []string{password, token, pathToken, "bXFiOnBhNTUtdzByZC1zZWNyZXQ="} {
					if strings.Contains(where.text, secret) {
						t.Errorf("%s shows the secret %q:\n%s", where.name, secret, where.text)
					}
				}
			}
			t.Log(shown)
		})
	}
}

const httpCallSrc = `
route enrich {
  batch_size = 25
  from file { path = "orders.jsonl" }
  id payload.order_id
  retry { attempts = 5, backoff = 10ms }
  to request {
    call http { url = "%s/enrich/${payload.order_id}" }
    forward switch {
      on = meta["http.status"]
      case "200" {
        to switch {
          on = payload.tier
          case "gold" { to file { path = "gold.jsonl" } }
          default { to file { path = "answered.jsonl" } }
        }
      }
      case "204" { to file { path = "nocontent.jsonl" } }
      default { to file { path = "unanswered.jsonl" } }
    }
  }
}
`

// TestHTTPRequestCallForwardsResponse: as a request's call, the response
// body replaces the payload (decoded, so the forward can read it) and
// meta["http.status"] holds the status; a record the call refuses (404) is
// forwarded as it was; a 204 keeps the payload; 503s retry the call, and
// the records then go out as they were read, not as answered.
func TestHTTPRequestCallForwardsResponse(t *testing.T) {
	srv := newHTTPServer(t, func(n int, h httpHit, w nethttp.ResponseWriter) {
		id := strings.TrimPrefix(h.path, "/enrich/")
		switch {
		case n <= 3:
			nethttp.Error(w, "warming up", nethttp.StatusServiceUnavailable)
		case id == "o-5":
			nethttp.Error(w, "unknown order", nethttp.StatusNotFound)
		case id == "o-6":
			w.WriteHeader(nethttp.StatusNoContent)
		default:
			tier := "silver"
			if strings.HasSuffix(id, "0") {
				tier = "gold"
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"order":%q,"tier":%q,"seen":%q}`, id, tier, h.body)
		}
	})
	dir := t.TempDir()
	const n = 60
	lines := plantest.WriteOrders(t, filepath.Join(dir, "orders.jsonl"), n)
	st := runtest.RunIn(t, dir, plantest.Compile(t, fmt.Sprintf(httpCallSrc, srv.URL))).Route("enrich")
	if st.In != n || st.Out != n {
		t.Errorf("stats %+v, want in = out = %d", st, n)
	}
	read := func(name string) []string {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(data))
	}
	gold, answered := read("gold.jsonl"), read("answered.jsonl")
	if len(gold) != 6 || len(answered) != n-8 {
		t.Errorf("gold %d, answered %d lines; want 6, %d", len(gold), len(answered), n-8)
	}
	for _, l := range append(gold, answered...) {
		var resp struct{ Order, Tier, Seen string }
		if err := json.Unmarshal([]byte(l), &resp); err != nil {
			t.Fatalf("forwarded %q: %v", l, err)
		}
		// The call sent the record as read, even on its retried attempt.
		if want := fmt.Sprintf(`{"order_id":%q,`, resp.Order); !strings.HasPrefix(resp.Seen, want) {
			t.Errorf("order %s: the call was sent %q", resp.Order, resp.Seen)
		}
		if gold := strings.HasSuffix(resp.Order, "0"); gold != (resp.Tier == "gold") {
			t.Errorf("order %s (tier %s) forwarded to the wrong branch", resp.Order, resp.Tier)
		}
	}
	// 204: answered, nothing to replace the payload with; 404: the call
	// refused the record, forwarded as it was, with no status.
	plantest.SameIDs(t, "204", read("nocontent.jsonl"), []string{lines[6]})
	plantest.SameIDs(t, "404", read("unanswered.jsonl"), []string{lines[5]})
	if len(srv.received()) <= n {
		t.Errorf("%d requests: the 503s were not retried", len(srv.received()))
	}
}

// TestHTTPHeaderMapping: a meta key becomes a valid, reversible header
// name; a value with a control character cannot break the header block.
func TestHTTPHeaderMapping(t *testing.T) {
	for _, tc := range []struct{ key, name string }{
		{"mqb.id", "Mqb-Meta-mqb.id"},
		{"sql.outcome", "Mqb-Meta-sql.outcome"},
		{"a b:c", "Mqb-Meta-a%20b%3Ac"},
		{"50%", "Mqb-Meta-50%25"},
		{"é", "Mqb-Meta-%C3%A9"},
		{"x\r\nHost: evil", "Mqb-Meta-x%0D%0AHost%3A%20evil"},
	} {
		if got := httpMetaHeaderName(tc.key); got != tc.name {
			t.Errorf("header name of %q = %q, want %q", tc.key, got, tc.name)
		}
	}
	for _, tc := range []struct{ value, sent string }{
		{"plain value", "plain value"},
		{"50% off\té", "50% off\té"},
		{"two\nlines 50%", "two%0Alines 50%25"},
	} {
		if got := httpHeaderValue(tc.value); got != tc.sent {
			t.Errorf("header value of %q = %q, want %q", tc.value, got, tc.sent)
		}
	}
	// Through a real request: the server reads back what was sent.
	srv := newHTTPServer(t, nil)
	s := newTestHTTPSink(t, map[string]plan.Value{"url": plantest.Str(srv.URL)}, nil)
	r := &runtime.Record{Payload: []byte(`{}`), Meta: map[string]string{"a b": "two\nlines", "Host": "evil", "mqb.src.path": "in.jsonl"}}
	if err := s.Write(context.Background(), []*runtime.Record{r}); err != nil || r.Refused() != "" {
		t.Fatalf("write: %v %s", err, r.Refused())
	}
	h := srv.received()[0].header
	if got := h.Get("Mqb-Meta-a%20b"); got != "two%0Alines" {
		t.Errorf("header Mqb-Meta-a%%20b = %q", got)
	}
	if got := h.Get("Mqb-Meta-Host"); got != "evil" {
		t.Errorf("header Mqb-Meta-Host = %q", got)
	}
	if got := h.Get("Mqb-Meta-mqb.src.path"); got != "" {
		t.Errorf("provenance forwarded: %q", got)
	}
}

func TestHTTPRedactURL(t *testing.T) {
	for _, tc := range []struct{ raw, shown string }{
		{"http://127.0.0.1:8080/orders/1", "http://127.0.0.1:8080/orders/1"},
		{"https://user:pw@api.example.com/x?token=abc&page=2#frag", "https://user:xxxxx@api.example.com/x?page=xxxxx&token=xxxxx"},
		{"https://TOKEN@hooks.example.com/x", "https://xxxxx@hooks.example.com/x"},
		{"http://u:p@host/%zz?token=abc", "http://u:xxxxx@host/%zz?xxxxx"},
	} {
		if got := redactHTTPURL(tc.raw); got != tc.shown {
			t.Errorf("redactHTTPURL(%q) = %q, want %q", tc.raw, got, tc.shown)
		}
	}
	got := redactTemplateURL([]plan.Part{{Lit: "https://u:secretpw@h/orders/"}, {Expr: "payload.id"}, {Lit: "?key=abcdefghij"}})
	if want := "https://u:xxxxx@h/orders/${payload.id}?key=xxxxx"; got != want {
		t.Errorf("redactTemplateURL = %q, want %q", got, want)
	}
}
