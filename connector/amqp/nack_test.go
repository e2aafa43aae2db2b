package amqp

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// refusingPlan is sqlitePlan over a table whose CHECK refuses the order of
// amount bad: the SQLite sink refuses that one record (a row-level error),
// and a route without a dlq stops on it.
func refusingPlan(url, queue, db string, batch, prefetch, bad int) plan.Plan {
	p := sqlitePlan(url, queue, db, batch, prefetch, false)
	sink := &p.Routes[0].Nodes[1]
	sink.Attrs["create_table"] = plantest.Str(fmt.Sprintf(
		`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL CHECK (amount <> %d), msgid TEXT, rk TEXT)`, bad))
	return p
}

// A record the route fails to deliver is never acked. The sink refuses
// order o-113 and the route has no dlq: the run stops with the reason,
// and once its connection is gone the queue holds o-113 and every order
// read after it (the route acks only the contiguous prefix it committed),
// each marked redelivered. A rerun with a dlq then gets o-113 again and
// dead-letters it with the reason: nothing was lost.
func TestAMQPFailedRecordIsRequeued(t *testing.T) {
	const n, bad = 200, 113
	for _, tc := range []struct {
		name            string
		batch, prefetch int
	}{
		{"batch1_prefetch1", 1, 1},
		{"batch16_prefetch100", 16, 100},
		{"batch64_prefetch500", 64, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := testsrv.RabbitMQ(t)
			q := queueName(t)
			declareQueue(t, url, q)
			publishOrders(t, url, q, 0, n, false)
			d := t.TempDir()
			db, dlq := filepath.Join(d, "orders.db"), filepath.Join(d, "dlq.jsonl")
			p := refusingPlan(url, q, db, tc.batch, tc.prefetch, bad)

			// The source acks what each commit covers, and under prefetch
			// 1 the broker sends nothing more until then: commits more
			// often than the default 100 ms, not one record per 100 ms.
			opts := runtest.Options()
			opts.CommitInterval = 5 * time.Millisecond

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			st, err := runtime.Run(ctx, p, opts)
			if err == nil || !strings.Contains(err.Error(), "CHECK constraint") || !strings.Contains(err.Error(), "no dlq") {
				t.Fatalf("run ended with %v, want the refused record's reason and that the route has no dlq", err)
			}
			rs := st.Route("consume")
			if rs.Errors == 0 || rs.Out >= n {
				t.Errorf("stats %+v: want the refused record counted as an error, not delivered", rs)
			}
			rows := runtest.SQLiteMap[int](t, db, `SELECT id, amount FROM orders`)
			if _, ok := rows[fmt.Sprintf("o-%d", bad)]; ok {
				t.Fatalf("the refused order o-%d is in the table", bad)
			}

			// What the broker holds again: o-113 and everything after it.
			// It puts back at once what the run's closed connection left
			// unacked: once the queue holds at least that many, it holds
			// all it will, and every one of them is read.
			ready := queueReady(t, url, q)
			for deadline := time.Now().Add(10 * time.Second); ready < n-bad && time.Now().Before(deadline); ready = queueReady(t, url, q) {
				time.Sleep(20 * time.Millisecond)
			}
			left := peekAll(t, url, q, ready)
			held := map[int]bool{}
			for _, m := range left {
				var o struct {
					Amount int `json:"amount"`
				}
				if err := json.Unmarshal(m.Body, &o); err != nil {
					t.Fatalf("message %s: %v", m.Body, err)
				}
				held[o.Amount] = true
				if o.Amount == bad && !m.Redelivered {
					t.Errorf("o-%d came back without the redelivered flag", bad)
				}
			}
			for i := bad; i < n; i++ {
				if !held[i] {
					t.Fatalf("o-%d, read at or after the refused record, was acked: the queue no longer holds it (it holds %d messages)", i, len(left))
				}
			}
			for i := range n {
				if _, written := rows[fmt.Sprintf("o-%d", i)]; !written && !held[i] {
					t.Errorf("o-%d is neither in the table nor back in the queue: lost", i)
				}
			}
			t.Logf("run stopped with %d rows written, %d messages back in the queue", len(rows), len(left))

			// The rerun, with a dlq, gets them from the broker again.
			p = withDLQ(p, 1, dlq)
			runtest.RunUntil(t, p, opts, time.Minute, func() bool {
				return runtest.CountRows(t, db) == n-1 && len(plantest.ReadDLQLines(t, dlq)) >= 1
			})
			lines := plantest.ReadDLQLines(t, dlq)
			if len(lines) != 1 || !strings.Contains(string(lines[0].Payload), fmt.Sprintf(`"o-%d"`, bad)) || !strings.Contains(lines[0].Error, "CHECK constraint") {
				t.Errorf("dlq %+v, want o-%d with the CHECK constraint's reason", lines, bad)
			}
			if ready := queueReady(t, url, q); ready != 0 {
				t.Errorf("queue holds %d messages after the rerun, want 0", ready)
			}
		})
	}
}

// peekAll reads the messages of queue without acking them, until it has n
// or none comes for a while, and closes its connection: the broker puts
// every one back.
func peekAll(t testing.TB, url, queue string, n int) []amqp.Delivery {
	return readQueue(t, url, queue, n, false)
}
