package httpserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
)

// replyRoute is a route from an http_server with request_reply on addr:
// orders of amount 0 are filtered, the others gain ref and status, and
// the rows land in the SQLite database db (amount NOT NULL: an
// order without one goes to the DLQ).
func replyRoute(addr, db string) string {
	return fmt.Sprintf(`route ingest {
  from http_server { address = %q, path = "/orders", request_reply = true }
  filter payload.amount != 0
  map {
    ref    = "R-" + payload.order_id
    status = "accepted"
  }
  dlq { to file { path = %q } }
  to sql {
    url          = "sqlite://%s"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)"
    insert_query = "INSERT INTO orders (id, amount) VALUES (${payload.order_id}, ${payload.amount}) ON CONFLICT (id) DO NOTHING"
  }
}
`, addr, filepath.Join(filepath.Dir(db), "dlq.jsonl"), db)
}

// With request_reply, a delivered record is answered 200 with the
// route's final payload as the body, and only once it is in the table; a
// filtered or dead-lettered one is answered 204 without a body, as
// without request_reply.
func TestHTTPServerReply(t *testing.T) {
	d := t.TempDir()
	addr, db := freeAddr(t), filepath.Join(d, "orders.db")
	r := startRoute(t, replyRoute(addr, db), addr)
	c := &http.Client{Timeout: time.Minute}
	for _, tc := range []struct {
		name, body string
		code       int
		reply      string // "": no body
		rows       int    // rows in the table once answered
	}{
		{"delivered", `{"order_id":"o-1","amount":3}`, http.StatusOK, `{"order_id":"o-1","amount":3,"ref":"R-o-1","status":"accepted"}`, 1},
		{"another", `{"order_id":"o-2","amount":5,"note":"x"}`, http.StatusOK, `{"order_id":"o-2","amount":5,"note":"x","ref":"R-o-2","status":"accepted"}`, 2},
		{"filtered", `{"order_id":"o-3","amount":0}`, http.StatusNoContent, "", 2},
		{"dead-lettered", `{"order_id":"o-4","amount":null}`, http.StatusNoContent, "", 2},
		{"a repeat the sink absorbs", `{"order_id":"o-1","amount":3}`, http.StatusOK, `{"order_id":"o-1","amount":3,"ref":"R-o-1","status":"accepted"}`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(t, c, "http://"+addr+"/orders", tc.body)
			if code != tc.code {
				t.Fatalf("answered %d %q, want %d", code, body, tc.code)
			}
			if tc.reply == "" && body != "" || tc.reply != "" && !sameJSON(body, tc.reply) {
				t.Errorf("reply %q, want %q", body, tc.reply)
			}
			if got := runtest.CountRows(t, db); got != tc.rows {
				t.Errorf("once answered the table holds %d rows, want %d", got, tc.rows)
			}
		})
	}
	lines := plantest.ReadDLQLines(t, filepath.Join(d, "dlq.jsonl"))
	if len(lines) != 1 || !strings.Contains(lines[0].Error, "NOT NULL") {
		t.Errorf("DLQ %+v, want o-4 with its reason", lines)
	}
	st := r.Stop(t).Route("ingest")
	runtest.CheckCounts(t, st)
	if st.In != 5 || st.Filtered != 1 || st.DeadLettered != 1 {
		t.Errorf("stats %+v, want 5 in, 1 filtered, 1 dead-lettered", st)
	}
}

// An unnest's elements come back one per line (NDJSON), in order; the
// elements the route filtered are not in it, and a record none of whose
// elements was delivered is answered 204.
func TestHTTPServerReplyUnnest(t *testing.T) {
	d := t.TempDir()
	addr := freeAddr(t)
	src := fmt.Sprintf(`route items {
  from http_server { address = %q, path = "/orders", request_reply = true }
  unnest payload.items as item
  filter payload.item.qty > 0
  map { line = payload.order_id + "/" + payload.item.sku }
  to file { path = %q }
}
`, addr, filepath.Join(d, "items.jsonl"))
	r := startRoute(t, src, addr)
	c := &http.Client{Timeout: time.Minute}
	for _, tc := range []struct {
		name, body string
		code       int
		lines      []string
	}{
		{"two of three", `{"order_id":"o-1","items":[{"sku":"a","qty":1},{"sku":"b","qty":0},{"sku":"c","qty":2}]}`, http.StatusOK,
			[]string{`{"order_id":"o-1","item":{"sku":"a","qty":1},"line":"o-1/a"}`, `{"order_id":"o-1","item":{"sku":"c","qty":2},"line":"o-1/c"}`}},
		{"none", `{"order_id":"o-2","items":[{"sku":"a","qty":0}]}`, http.StatusNoContent, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/orders", strings.NewReader(tc.body))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.code {
				t.Fatalf("answered %d %q, want %d", resp.StatusCode, body, tc.code)
			}
			if id := resp.Header.Get("Mqb-Id"); id != "" {
				t.Errorf("an unnest's answer carries Mqb-Id %q: its elements each have their own", id)
			}
			if tc.lines == nil {
				if len(body) != 0 {
					t.Errorf("reply %q, want none", body)
				}
				return
			}
			got := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
			if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
				t.Errorf("Content-Type %q, want application/x-ndjson", ct)
			}
			if len(got) != len(tc.lines) {
				t.Fatalf("reply %q, want %d lines", body, len(tc.lines))
			}
			for i := range got {
				if !sameJSON(got[i], tc.lines[i]) {
					t.Errorf("line %d %s, want %s", i, got[i], tc.lines[i])
				}
			}
		})
	}
	runtest.CheckCounts(t, r.Stop(t).Route("items"))
}

// Without request_reply a delivered record is answered 204 with no body,
// as before replies existed.
func TestHTTPServerNoReplyByDefault(t *testing.T) {
	d := t.TempDir()
	addr, db := freeAddr(t), filepath.Join(d, "orders.db")
	r := startRoute(t, strings.Replace(replyRoute(addr, db), ", request_reply = true", "", 1), addr)
	code, body := post(t, &http.Client{Timeout: time.Minute}, "http://"+addr+"/orders", order(7))
	if code != http.StatusNoContent || body != "" {
		t.Errorf("answered %d %q, want 204 without a body", code, body)
	}
	runtest.CheckCounts(t, r.Stop(t).Route("ingest"))
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

// Behind a request whose call is an HTTP endpoint, the reply is the
// call's response: the call replaced the payload with it, and forward
// wrote it. A record the call refuses is forwarded as it was, and that
// is what it is answered with.
func TestHTTPServerReplyIsTheCallsResponse(t *testing.T) {
	pricing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var o struct {
			OrderID string `json:"order_id"`
			Amount  int    `json:"amount"`
		}
		if err := json.NewDecoder(req.Body).Decode(&o); err != nil || o.Amount < 0 {
			http.Error(w, "no price for that", http.StatusUnprocessableEntity)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"order_id":%q,"price":%d}`, o.OrderID, o.Amount*10)
	}))
	defer pricing.Close()
	d := t.TempDir()
	addr, out := freeAddr(t), filepath.Join(d, "priced.jsonl")
	r := startRoute(t, fmt.Sprintf(`route priced {
  from http_server { address = %q, path = "/orders", request_reply = true }
  to request {
    call http { url = "%s/price" }
    forward file { path = %q }
  }
}
`, addr, pricing.URL, out), addr)
	c := &http.Client{Timeout: time.Minute}
	for _, tc := range []struct{ body, reply string }{
		{`{"order_id":"o-1","amount":3}`, `{"order_id":"o-1","price":30}`},
		{`{"order_id":"o-2","amount":-1}`, `{"order_id":"o-2","amount":-1}`},
	} {
		code, body := post(t, c, "http://"+addr+"/orders", tc.body)
		if code != http.StatusOK || !sameJSON(body, tc.reply) {
			t.Errorf("POST %s: answered %d %q, want 200 %s", tc.body, code, body, tc.reply)
		}
	}
	runtest.CheckCounts(t, r.Stop(t).Route("priced"))
	if got := plantest.ReadLines(t, out); len(got) != 2 || !sameJSON(got[0], `{"order_id":"o-1","price":30}`) {
		t.Errorf("forward wrote %q, want the priced order first", got)
	}
}
