package httpserver

import (
	"fmt"
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
			const n, clients = 1500, 6
			var answered atomic.Int64
			work := make(chan int, n)
			for i := range n {
				work <- i
			}
			close(work)
			stop := make(chan struct{})
			defer close(stop)
			var wg sync.WaitGroup
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := &http.Client{Timeout: 30 * time.Second}
					for i := range work {
						if !sendUntilCommitted(c, "http://"+addr+"/orders", i, tc.stampIDs, stop) {
							return
						}
						answered.Add(1)
					}
				}()
			}
			st := runtest.CrashUntil(t, bin, p, d, uint64(71+i), 4, func() bool { return answered.Load() == n })
			wg.Wait()
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

// sendUntilCommitted posts order i until the route answers 2xx, waiting a
// little after a refused connection, a 503 or a cut one, as a client
// that loses nothing does; false when stop closed first.
func sendUntilCommitted(c *http.Client, url string, i int, stampID bool, stop chan struct{}) bool {
	for {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(order(i)))
		if stampID {
			req.Header.Set(HeaderIdempotencyKey, fmt.Sprintf("order-%d", i))
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return true
			}
		}
		select {
		case <-stop:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}
