package amqp

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// Every message lands once with its producer's message_id, and once the
// run stops the queue holds nothing: each was acked after its commit.
func TestAMQPSourceToSQLite(t *testing.T) {
	url := testsrv.RabbitMQ(t)
	q := queueName(t)
	declareQueue(t, url, q)
	db := filepath.Join(t.TempDir(), "orders.db")
	const n = 5000
	ids := publishOrders(t, url, q, 0, n, true)
	p := sqlitePlan(url, q, db, 256, 1000, true)
	st := runtest.RunUntil(t, p, runtest.Options(), 2*time.Minute, func() bool { return runtest.CountRows(t, db) == n })
	runtest.CheckCounts(t, st.Route("consume"))
	runtest.CheckOrders(t, db, n)
	for id, mid := range runtest.SQLiteMap[string](t, db, `SELECT id, msgid FROM orders`) {
		if ids[id] != mid {
			t.Fatalf("%s: message_id %s, published with message_id %s", id, mid, ids[id])
		}
	}
	for id, rk := range runtest.SQLiteMap[string](t, db, `SELECT id, rk FROM orders`) {
		if rk != q {
			t.Fatalf("%s: mqb.src.routing_key %q, want %q", id, rk, q)
		}
	}
	if ready := queueReady(t, url, q); ready != 0 {
		t.Errorf("queue holds %d messages after the run, want 0 (all acked)", ready)
	}
	began := time.Now()
	st = runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return time.Since(began) > time.Second })
	if in := st.Route("consume").In; in != 0 {
		t.Errorf("second run read %d records, want 0", in)
	}
}

// A run cancelled part-way acks only what it committed: what it had read
// and not committed goes back to the queue, and the next run delivers
// every order (the sink's key absorbs what both runs got).
func TestAMQPCancelledRunRedelivers(t *testing.T) {
	url := testsrv.RabbitMQ(t)
	q := queueName(t)
	declareQueue(t, url, q)
	db := filepath.Join(t.TempDir(), "orders.db")
	const n = 20000
	publishOrders(t, url, q, 0, n, false)
	p := sqlitePlan(url, q, db, 64, 2000, false)
	rs := runtest.RunCancelled(t, p, "consume", 50*time.Millisecond)
	rows := runtest.CountRows(t, db)
	ready := queueReady(t, url, q)
	t.Logf("cancelled run: %+v; %d rows, %d messages left in the queue", rs, rows, ready)
	if rows+ready < n {
		t.Fatalf("after the cancelled run: %d rows + %d queued < %d published: messages acked before their commit", rows, ready, n)
	}
	st := runtest.RunUntil(t, p, runtest.Options(), 2*time.Minute, func() bool { return runtest.CountRows(t, db) == n })
	runtest.CheckCounts(t, st.Route("consume"))
	runtest.CheckOrders(t, db, n)
	if ready := queueReady(t, url, q); ready != 0 {
		t.Errorf("queue holds %d messages after the last run, want 0", ready)
	}
}

// TestCrashAMQPToSQLite: the route SIGKILLed repeatedly (the broker is
// another process and survives): the broker gives a killed consumer's
// unacked messages out again, every order lands once, and at the end
// nothing is left in the queue.
func TestCrashAMQPToSQLite(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	url := testsrv.RabbitMQ(t)
	q := queueName(t)
	declareQueue(t, url, q)
	d := t.TempDir()
	db := filepath.Join(d, "orders.db")
	const n = 50000
	publishOrders(t, url, q, 0, n, false)
	st := runtest.CrashUntil(t, bin, sqlitePlan(url, q, db, 32, 500, false), d, 53, 12,
		func() bool { return runtest.CountRows(t, db) == n && queueReady(t, url, q) == 0 })
	rs := st.Route("consume")
	runtest.CheckCounts(t, rs)
	t.Logf("final run %+v", rs)
	runtest.CheckOrders(t, db, n)
	if ready := queueReady(t, url, q); ready != 0 {
		t.Errorf("queue holds %d messages after the final run, want 0", ready)
	}
}

// TestAMQPOutage: the broker is killed mid-run and
// starts again two seconds later on the same port and data: the source
// reconnects, the messages it held unacked come back, orders published
// after the restart arrive too, and every order lands once with the
// queue left empty.
func TestAMQPOutage(t *testing.T) {
	// A RabbitMQ node takes 10-40 s to start again: the source is taken
	// down the harsher way only (a kill leaves no goodbye on the
	// connection); the graceful stop is the other brokers' case.
	for _, down := range testsrv.Downs[1:] {
		t.Run(down.Name, func(t *testing.T) {
			srv := testsrv.SharedRabbitMQ(t)
			url := srv.URL()
			q := queueName(t)
			declareQueue(t, url, q)
			db := filepath.Join(t.TempDir(), "orders.db")
			const n = 20000
			publishOrders(t, url, q, 0, n, false)
			rs := runtest.Outage{
				Plan: sqlitePlan(url, q, db, 64, 500, false), Route: "consume",
				Underway: func() bool { return runtest.CountRows(t, db) > 0 },
				Outage: func() {
					down.Outage(t, srv, 2*time.Second)
					publishOrders(t, url, q, n, n, false) // after the outage too
				},
				Done:   func() bool { return runtest.CountRows(t, db) == 2*n },
				Expect: runtest.RidesThrough,
			}.Run(t)
			t.Logf("%+v", rs)
			runtest.CheckOrders(t, db, 2*n)
			if ready := queueReady(t, url, q); ready != 0 {
				t.Errorf("queue holds %d messages after the run, want 0", ready)
			}
		})
	}
}

// Bad input (not JSON) goes to the DLQ with the reason; the good orders
// land and the bad messages are acked like the rest.
func TestAMQPBadInputToDLQ(t *testing.T) {
	url := testsrv.RabbitMQ(t)
	q := queueName(t)
	ch := declareQueue(t, url, q)
	publishOrders(t, url, q, 0, 10, false)
	for _, body := range []string{`{"order_id":`, `not json`} {
		if err := ch.Publish("", q, false, false, amqpText(body)); err != nil {
			t.Fatal(err)
		}
	}
	d := t.TempDir()
	db, dlq := filepath.Join(d, "orders.db"), filepath.Join(d, "dlq.jsonl")
	p := sqlitePlan(url, q, db, 16, 100, false)
	p = withDLQ(p, 1, dlq)
	st := runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool {
		return runtest.CountRows(t, db) == 10 && len(plantest.ReadDLQLines(t, dlq)) == 2
	})
	rs := st.Route("consume")
	runtest.CheckCounts(t, rs)
	if rs.DeadLettered != 2 {
		t.Errorf("dead-lettered %d, want 2", rs.DeadLettered)
	}
	for _, l := range plantest.ReadDLQLines(t, dlq) {
		if !strings.Contains(l.Error, "json") && !strings.Contains(l.Error, "JSON") {
			t.Errorf("DLQ reason %q does not say the payload is not JSON", l.Error)
		}
	}
	if ready := queueReady(t, url, q); ready != 0 {
		t.Errorf("queue holds %d messages after the run, want 0", ready)
	}
}
