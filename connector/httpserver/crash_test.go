package httpserver

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
)

// Clients send orders while the route is SIGKILLed again and again, each
// sending an order again until it gets a 2xx. Nothing is lost either way;
// with the clients' Idempotency-Key as message_id the table holds each
// order once, and without it (a fresh id per request) a retry of an order
// the killed route had written lands again, as at-least-once says.
func TestCrashHTTPServerClientRetries(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	// A request is answered at the commit after its write: at the default
	// 100 ms interval 6 clients get about 60 answers a second, 25 s for
	// 1500 orders. Committing every 10 ms, the runs killed also commit
	// many times before their kill.
	t.Setenv("MQB_CRASH_COMMIT_INTERVAL", "10ms")
	for i, tc := range []struct {
		name      string
		from      string
		stampIDs  bool
		guarantee string
	}{
		{"client ids", ", producer_ids = true", true, plan.EffectivelyOnce},
		{"no ids", "", false, plan.AtLeastOnce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			addr, db := freeAddr(t), filepath.Join(d, "orders.db")
			p := plantest.Compile(t, fmt.Sprintf(`route ingest {
  batch_size = 32
  from http_server { address = %q, path = "/orders" %s }
  to sql {
    url          = "sqlite://%s"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, order_id TEXT NOT NULL)"
    insert_query = "INSERT INTO orders (id, order_id) VALUES (${message_id}, ${payload.order_id}) ON CONFLICT (id) DO NOTHING"
  }
}
`, addr, tc.from, db))
			if g := p.Routes[0].Guarantee; g != tc.guarantee {
				t.Fatalf("the compiler says %s, the test expects %s", g, tc.guarantee)
			}
			const n = 1500
			answered, wait := sendOrders(t, "http://"+addr+"/orders", n, tc.stampIDs, func(int, int, []byte) {})
			st := runtest.CrashUntil(t, bin, p, d, uint64(71+i), 4, func() bool { return answered.Load() == n })
			wait()
			runtest.CheckCounts(t, st.Route("ingest"))
			got := runtest.SQLiteMap[int64](t, db, `SELECT order_id, count(*) FROM orders GROUP BY order_id`)
			lost, repeated := 0, 0
			for i := range n {
				c := got[fmt.Sprintf("o-%d", i)]
				if c == 0 {
					lost++
				}
				if c > 1 {
					repeated++
				}
			}
			if lost > 0 {
				t.Errorf("%d of %d orders answered 204 are not in the table", lost, n)
			}
			if tc.guarantee == plan.EffectivelyOnce && repeated > 0 {
				t.Errorf("%d orders are in the table more than once on an effectively-once route", repeated)
			}
			t.Logf("%d orders, %d in the table more than once", n, repeated)
		})
	}
}

// sendOrders has 6 clients post orders 0..n-1 to url, each until it is
// answered 2xx (sendUntilCommitted), handing every answer to got and
// counting it in answered. wait waits for every order to be answered.
func sendOrders(t *testing.T, url string, n int, stampIDs bool, got func(i, code int, body []byte)) (answered *atomic.Int64, wait func()) {
	answered = new(atomic.Int64)
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	stop := make(chan struct{}) // a client retries until answered, or the test ended
	t.Cleanup(func() { close(stop) })
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 30 * time.Second}
			for i := range work {
				code, body, ok := sendUntilCommitted(c, url, i, stampIDs, stop)
				if !ok {
					return
				}
				got(i, code, body)
				answered.Add(1)
			}
		}()
	}
	return answered, wg.Wait
}

// sendUntilCommitted posts order i until the route answers 2xx, waiting a
// little after a refused connection, a 503 or a cut one, as a client
// that loses nothing does, and returns the 2xx answer; ok is false when
// stop closed first.
func sendUntilCommitted(c *http.Client, url string, i int, stampID bool, stop chan struct{}) (code int, body []byte, ok bool) {
	for {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(order(i)))
		if stampID {
			req.Header.Set(HeaderIdempotencyKey, fmt.Sprintf("order-%d", i))
		}
		resp, err := c.Do(req)
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode/100 == 2 {
				return resp.StatusCode, body, true
			}
		}
		select {
		case <-stop:
			return 0, nil, false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Under request_reply, clients send orders while the route is SIGKILLed
// again and again, each sending an order again until it gets a 2xx: a
// request cut by a kill gets no 2xx, and its retry is answered with the
// reply. Every order ends in the table once, and every answer is 200 with
// that order's reply, also for a retry of an order a killed run had
// written (the sink absorbs the repeat and the record is delivered).
func TestCrashHTTPServerReply(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	t.Setenv("MQB_CRASH_COMMIT_INTERVAL", "10ms") // as in TestCrashHTTPServerClientRetries
	d := t.TempDir()
	addr, db := freeAddr(t), filepath.Join(d, "orders.db")
	p := plantest.Compile(t, fmt.Sprintf(`route ingest {
  batch_size = 32
  from http_server { address = %q, path = "/orders", producer_ids = true, request_reply = true }
  map { ref = "R-" + payload.order_id }
  to sql {
    url          = "sqlite://%s"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, order_id TEXT NOT NULL)"
    insert_query = "INSERT INTO orders (id, order_id) VALUES (${message_id}, ${payload.order_id}) ON CONFLICT (id) DO NOTHING"
  }
}
`, addr, db))
	const n = 600
	var wrong atomic.Int64
	var firstWrong atomic.Value
	answered, wait := sendOrders(t, "http://"+addr+"/orders", n, true, func(i, code int, body []byte) {
		want := fmt.Sprintf(`{"order_id":"o-%d","amount":%d,"ref":"R-o-%d"}`, i, i, i)
		if code != http.StatusOK || !sameJSON(string(body), want) {
			wrong.Add(1)
			firstWrong.CompareAndSwap(nil, fmt.Sprintf("order %d answered %d %q, want 200 %s", i, code, body, want))
		}
	})
	st := runtest.CrashUntil(t, bin, p, d, 97, 3, func() bool { return answered.Load() == n })
	wait()
	runtest.CheckCounts(t, st.Route("ingest"))
	if w := wrong.Load(); w > 0 {
		t.Errorf("%d of %d answers were not the order's reply; the first: %v", w, n, firstWrong.Load())
	}
	got := runtest.SQLiteMap[int64](t, db, `SELECT order_id, count(*) FROM orders GROUP BY order_id`)
	for i := range n {
		if c := got[fmt.Sprintf("o-%d", i)]; c != 1 {
			t.Errorf("order o-%d is in the table %d times, want once", i, c)
		}
	}
}
