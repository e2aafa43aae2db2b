package httpserver

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// Each POST is one record, answered 204 only once the route committed
// past it: when the answer arrives, the row is already in the table.
func TestHTTPServerAnswersAfterCommit(t *testing.T) {
	d := t.TempDir()
	addr, db := freeAddr(t), filepath.Join(d, "orders.db")
	r := startRoute(t, ordersRoute(addr, db, "", `${payload.order_id}`), addr)
	c := &http.Client{Timeout: time.Minute}
	const n = 20
	for i := range n {
		if code, body := post(t, c, "http://"+addr+"/orders", order(i)); code != http.StatusNoContent {
			t.Fatalf("POST %d: %d %s", i, code, body)
		}
		if got := runtest.CountRows(t, db); got != i+1 {
			t.Fatalf("after the answer to POST %d the table holds %d rows, want %d", i, got, i+1)
		}
	}
	st := r.Stop(t).Route("ingest")
	runtest.CheckCounts(t, st)
	if st.In != n || st.Out != n {
		t.Errorf("stats %+v, want %d in and out", st, n)
	}
}

// A request that cannot be a record is answered at once with why, and
// never enters the route; one that can is answered 204.
func TestHTTPServerRefusals(t *testing.T) {
	d := t.TempDir()
	addr, db := freeAddr(t), filepath.Join(d, "orders.db")
	src := ordersRoute(addr, db, `, max_body_bytes = 64, producer_ids = true, username = "ingest", password = "${env(\"MQB_TEST_INGEST_PASSWORD\")}"`, `${message_id}`)
	t.Setenv("MQB_TEST_INGEST_PASSWORD", "s3cret")
	r := startRoute(t, src, addr)
	c := &http.Client{Timeout: time.Minute}
	auth := func(user, pass string) string {
		req, _ := http.NewRequest(http.MethodPost, "http://x", nil)
		req.SetBasicAuth(user, pass)
		return req.Header.Get("Authorization")
	}
	good := auth("ingest", "s3cret")
	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
		want                     int
		says                     string
	}{
		{"get", http.MethodGet, "/orders", "", []string{"Authorization", good}, http.StatusMethodNotAllowed, "only POST"},
		{"other path", http.MethodPost, "/other", order(1), []string{"Authorization", good, "Idempotency-Key", "k-1"}, http.StatusNotFound, ""},
		{"below path", http.MethodPost, "/orders/x", order(1), []string{"Authorization", good, "Idempotency-Key", "k-1"}, http.StatusNotFound, ""},
		{"no credentials", http.MethodPost, "/orders", order(1), []string{"Idempotency-Key", "k-1"}, http.StatusUnauthorized, "unauthorized"},
		{"wrong password", http.MethodPost, "/orders", order(1), []string{"Authorization", auth("ingest", "s3cret!"), "Idempotency-Key", "k-1"}, http.StatusUnauthorized, "unauthorized"},
		{"wrong user", http.MethodPost, "/orders", order(1), []string{"Authorization", auth("Ingest", "s3cret"), "Idempotency-Key", "k-1"}, http.StatusUnauthorized, "unauthorized"},
		{"no id", http.MethodPost, "/orders", order(1), []string{"Authorization", good}, http.StatusBadRequest, "no Idempotency-Key"},
		{"too large", http.MethodPost, "/orders", `{"order_id":"o-1","amount":1,"note":"` + strings.Repeat("x", 64) + `"}`, []string{"Authorization", good, "Idempotency-Key", "k-1"}, http.StatusRequestEntityTooLarge, "max_body_bytes"},
		{"not json", http.MethodPost, "/orders", `{"order_id":`, []string{"Authorization", good, "Idempotency-Key", "k-1"}, http.StatusBadRequest, "not one JSON document"},
		{"two documents", http.MethodPost, "/orders", order(1) + "\n" + order(2) + "\n", []string{"Authorization", good, "Idempotency-Key", "k-1"}, http.StatusBadRequest, "not one JSON document"},
		{"good", http.MethodPost, "/orders", order(1), []string{"Authorization", good, "Idempotency-Key", "k-1"}, http.StatusNoContent, ""},
		{"its retry", http.MethodPost, "/orders", order(1), []string{"Authorization", good, "Idempotency-Key", "k-1"}, http.StatusNoContent, ""},
		{"mqb id header", http.MethodPost, "/orders", order(2), []string{"Authorization", good, "mq_bridge.message_id", "0190f3a4-5b6c-7d8e-9f00-112233445566"}, http.StatusNoContent, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := send(t, c, tc.method, "http://"+addr+tc.path, tc.body, tc.header...)
			if code != tc.want || !strings.Contains(body, tc.says) {
				t.Errorf("%d %q, want %d saying %q", code, body, tc.want, tc.says)
			}
		})
	}
	st := r.Stop(t).Route("ingest")
	runtest.CheckCounts(t, st)
	// Only the good request, its retry and the one with an mqb id got in;
	// the retry's row is the first's (the same client id).
	if st.In != 3 {
		t.Errorf("stats %+v, want 3 records in", st)
	}
	ids := runtest.SQLiteMap[int64](t, db, `SELECT id, amount FROM orders`)
	if len(ids) != 2 || ids["0190f3a4-5b6c-7d8e-9f00-112233445566"] != 2 {
		t.Errorf("rows %v, want two: the retried record once, and the one keyed by its mq_bridge.message_id", ids)
	}
}

// A record the route took is answered 204 once committed, and 503 when
// the source closes first (the route failed or stopped); a request that
// comes while the route drains is answered 503 and never taken.
func TestSourceAnswersAfterCommitOr503(t *testing.T) {
	for _, tc := range []struct {
		name   string
		commit bool
		want   int
	}{
		{"committed", true, http.StatusNoContent},
		{"closed first", false, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSource("t", plantest.Logger())
			s.address, s.path, s.maxBody, s.format = freeAddr(t), "/", 1<<10, "raw"
			if err := s.Open(context.Background(), checkpoint.Position{}, false, nil); err != nil {
				t.Fatal(err)
			}
			c := &http.Client{Timeout: time.Minute}
			answers := make(chan int, 1)
			go func() {
				code, _ := post(t, c, "http://"+s.address+"/", "r-0")
				answers <- code
			}()
			b, _, err := s.Next(context.Background(), 10)
			if err != nil || b.Len() != 1 || string(b.Records()[0].Payload) != "r-0" {
				t.Fatalf("Next: %v, %d records", err, b.Len())
			}
			select {
			case code := <-answers:
				t.Fatalf("answered %d before the route committed", code)
			case <-time.After(200 * time.Millisecond):
			}
			if tc.commit {
				if err := s.Commit(context.Background(), map[int32]runtime.AckPos{0: {Next: 1}}); err != nil {
					t.Fatal(err)
				}
				if code := <-answers; code != tc.want {
					t.Errorf("answered %d, want %d", code, tc.want)
				}
			}
			// A drain: Next sees its context end, and a new request is
			// refused.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if b, _, _ := s.Next(ctx, 10); b.Len() != 0 {
				t.Fatalf("Next after the drain began took %d records", b.Len())
			}
			if code, _ := post(t, c, "http://"+s.address+"/", "r-1"); code != http.StatusServiceUnavailable {
				t.Errorf("a request during the drain answered %d, want 503", code)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if !tc.commit {
				if code := <-answers; code != tc.want {
					t.Errorf("answered %d, want %d", code, tc.want)
				}
			}
		})
	}
}

// A record the sink refuses is answered 204 once it is in the DLQ with
// the reason; with no dlq the route stops, and the request is answered
// 503: the record is the client's to send again.
func TestHTTPServerRefusedRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		dlq  bool
		want int
	}{
		{"dead-lettered", true, http.StatusNoContent},
		{"route fails", false, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			addr, db, dlq := freeAddr(t), filepath.Join(d, "orders.db"), filepath.Join(d, "dlq.jsonl")
			src := ordersRoute(addr, db, "", `${payload.order_id}`)
			if !tc.dlq {
				src = strings.Replace(src, `dlq { to file { path = "`+dlq+`" } }`, "", 1)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				st  runtime.Stats
				err error
			}
			ended := make(chan result, 1)
			go func() {
				st, err := runtime.Run(ctx, plantest.Compile(t, src), runtest.Options())
				ended <- result{st, err}
			}()
			waitListening(t, addr)
			// amount is NOT NULL: the sink refuses the row.
			code, body := post(t, &http.Client{Timeout: time.Minute}, "http://"+addr+"/orders", `{"order_id":"o-1"}`)
			if code != tc.want {
				t.Errorf("answered %d %q, want %d", code, body, tc.want)
			}
			lines := plantest.ReadDLQLines(t, dlq)
			if tc.dlq && (len(lines) != 1 || !strings.Contains(lines[0].Error, "NOT NULL")) {
				t.Errorf("DLQ %+v, want the record with its reason", lines)
			}
			cancel()
			res := <-ended
			if tc.dlq {
				if res.err != nil {
					t.Fatal(res.err)
				}
				runtest.CheckCounts(t, res.st.Route("ingest"))
			} else if res.err == nil || !strings.Contains(res.err.Error(), "NOT NULL") {
				t.Errorf("the run ended with %v, want the sink's refusal", res.err)
			}
		})
	}
}
