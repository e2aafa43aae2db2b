package httpserver

import (
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/runtest"
)

// Only meta["mqb.id"] and the keys under meta["reply.…"] become response
// headers, encoded so that no value or name can break the header block.
func TestHTTPServerReplyHeaderAllowList(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta map[string]string
		want http.Header
	}{
		{"no meta", nil, nil},
		{"nothing allowed", map[string]string{"sql.outcome": "inserted", "http.status": "200", "mqb.src.topic": "t", "Location": "/x", "reply.": "empty name"}, nil},
		{"id", map[string]string{"mqb.id": "o-1", "other": "x"}, http.Header{"Mqb-Id": {"o-1"}}},
		{"reply keys", map[string]string{"reply.Location": "/orders/o-1", "reply.a b": "x", "reply.note": "two\nlines 50%"},
			http.Header{"Mqb-Reply-Location": {"/orders/o-1"}, "Mqb-Reply-a%20b": {"x"}, "Mqb-Reply-note": {"two%0Alines 50%25"}}},
		{"a reply key cannot name a framing header", map[string]string{"reply.Content-Length": "0", "reply.x\r\nSet-Cookie: a": "b"},
			http.Header{"Mqb-Reply-Content-Length": {"0"}, "Mqb-Reply-x%0D%0ASet-Cookie%3A%20a": {"b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := replyHeaders(tc.meta); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("replyHeaders(%v) = %v, want %v", tc.meta, got, tc.want)
			}
		})
	}
}

// Through a running route: a delivered record's answer carries its
// mqb.id and the reply.* keys a map step set as headers; meta the route
// set under other keys and the request's own headers are not echoed; a
// filtered record's 204 carries none.
func TestHTTPServerReplyHeaders(t *testing.T) {
	d := t.TempDir()
	addr, db := freeAddr(t), filepath.Join(d, "orders.db")
	r := startRoute(t, fmt.Sprintf(`route ingest {
  from http_server { address = %q, path = "/orders", request_reply = true }
  id payload.order_id
  filter payload.amount != 0
  map {
    meta["reply.Location"] = "/orders/" + payload.order_id
    meta["reply.note"]     = payload.note
    meta["internal"]       = "not for the client"
  }
  to sql {
    url          = "sqlite://%s"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)"
    insert_query = "INSERT INTO orders (id, amount) VALUES (${meta[\"mqb.id\"]}, ${payload.amount}) ON CONFLICT (id) DO NOTHING"
  }
}
`, addr, db), addr)
	c := &http.Client{Timeout: time.Minute}
	for _, tc := range []struct {
		name, body string
		code       int
		want       map[string]string // header: value; "" must be absent
	}{
		{"delivered", `{"order_id":"o-1","amount":3,"note":"ok"}`, http.StatusOK, map[string]string{
			"Mqb-Id": "o-1", "Mqb-Reply-Location": "/orders/o-1", "Mqb-Reply-Note": "ok",
			"Mqb-Reply-Internal": "", "Mqb-Meta-Internal": "", "Internal": "", "X-Client-Secret": "", "Mqb-Reply-Injected": ""}},
		{"a value with a line break", `{"order_id":"o-2","amount":1,"note":"a\nb"}`, http.StatusOK, map[string]string{
			"Mqb-Id": "o-2", "Mqb-Reply-Location": "/orders/o-2", "Mqb-Reply-Note": "a%0Ab"}},
		{"filtered", `{"order_id":"o-3","amount":0,"note":"no"}`, http.StatusNoContent, map[string]string{
			"Mqb-Id": "", "Mqb-Reply-Location": "", "Mqb-Reply-Note": ""}},
		{"a repeat the sink absorbs", `{"order_id":"o-1","amount":3,"note":"again"}`, http.StatusOK, map[string]string{
			"Mqb-Id": "o-1", "Mqb-Reply-Location": "/orders/o-1", "Mqb-Reply-Note": "again"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/orders", strings.NewReader(tc.body))
			req.Header.Set("X-Client-Secret", "s3cret")
			req.Header.Set("Mqb-Reply-Injected", "yes")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("answered %d, want %d", resp.StatusCode, tc.code)
			}
			for name, want := range tc.want {
				if got := resp.Header.Get(name); got != want {
					t.Errorf("header %s = %q, want %q", name, got, want)
				}
			}
			for name := range resp.Header {
				if strings.HasPrefix(name, "Mqb-") && tc.want[name] == "" {
					t.Errorf("unexpected header %s: %q", name, resp.Header.Get(name))
				}
			}
		})
	}
	runtest.CheckCounts(t, r.Stop(t).Route("ingest"))
}
