package amqp

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
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
	// The broker puts back the unacked messages of the closed connection
	// on its own time: a short wait for them (a message acked before its
	// commit never comes back).
	var ready int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if ready = queueReady(t, url, q); rows+ready >= n || time.Now().After(deadline) {
			break
		}
	}
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
	if testing.Short() {
		t.Skip("crash tests build and kill a real process") // before the broker and the orders
	}
	url := testsrv.RabbitMQ(t)
	q := queueName(t)
	declareQueue(t, url, q)
	d := t.TempDir()
	db := filepath.Join(d, "orders.db")
	const n = 50000
	// The orders are published while the crash helper builds.
	var pubErr error
	published := make(chan struct{})
	go func() { defer close(published); pubErr = publishAll(url, q, orders(0, n, false, nil)) }()
	t.Cleanup(func() { <-published }) // before the queue goes
	bin := runtest.BuildCrashHelper(t)
	<-published
	if pubErr != nil {
		t.Fatal(pubErr)
	}
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
			declared := time.Now()
			db := filepath.Join(t.TempDir(), "orders.db")
			const n = 20000
			publishOrders(t, url, q, 0, n, false)
			// A declaration younger than this may not survive the kill.
			time.Sleep(time.Until(declared.Add(testsrv.RabbitMetadataFlush)))
			// The source acks what each commit covers, and the broker
			// sends no more than prefetch unacked: commits more often
			// than the default 100 ms keep it from waiting for them.
			opts := runtest.Options()
			opts.CommitInterval = 10 * time.Millisecond
			rs := runtest.Outage{
				Plan: sqlitePlan(url, q, db, 64, 500, false), Route: "consume", Options: &opts,
				Underway: func() bool { return runtest.CountRows(t, db) > 0 },
				Outage: func() {
					down.Outage(t, srv, 2*time.Second)
					waitQueue(t, url, q)
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
	declareQueue(t, url, q)
	publishOrders(t, url, q, 0, 10, false)
	publish(t, url, q, slices.Values([]amqp.Publishing{amqpText(`{"order_id":`), amqpText(`not json`)}))
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

// TestAMQPSourceReconnectWaitsForQueue: a broker that is up again may
// answer NOT_FOUND for a durable queue it has not recovered yet. Here the
// queue is deleted under the source (the broker cancels its consumer, as
// a lost connection ends its deliveries) and declared again only once
// the source has been told NOT_FOUND: the source keeps reconnecting and
// reads what is published then. A queue that stays missing past the
// window fails the route, naming the queue.
func TestAMQPSourceReconnectWaitsForQueue(t *testing.T) {
	url := testsrv.RabbitMQ(t)
	for _, tc := range []struct {
		name   string
		window time.Duration
		back   bool // the queue is declared again
	}{
		{"queue_back", queueRecoveryWindow, true},
		{"queue_gone", 200 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := queueName(t)
			ch := declareQueue(t, url, q)
			logs := make(chan string, 100)
			s := &source{route: "r", log: slog.New(logWatch(logs)), url: url, queue: q, prefetch: 10, format: "text",
				queueWindow: tc.window}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := s.Open(ctx, checkpoint.Position{}, false, nil); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			type next struct {
				b   *runtime.Batch
				err error
			}
			done := make(chan next, 1)
			go func() {
				b, _, err := s.Next(ctx, 10)
				done <- next{b, err}
			}()
			if _, err := ch.QueueDelete(q, false, false, false); err != nil {
				t.Fatal(err)
			}
			if !tc.back {
				r := <-done
				if r.err == nil || !strings.Contains(r.err.Error(), "queue "+q+" not found") {
					t.Fatalf("Next: %v; want the route failed naming queue %s", r.err, q)
				}
				return
			}
		wait:
			for {
				select {
				case m := <-logs:
					if strings.Contains(m, "queue not found") {
						break wait
					}
				case r := <-done:
					t.Fatalf("Next returned %v before the queue was back", r.err)
				case <-ctx.Done():
					t.Fatal("the source never met the missing queue")
				}
			}
			if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			publish(t, url, q, slices.Values([]amqp.Publishing{amqpText("back")}))
			r := <-done
			if r.err != nil {
				t.Fatalf("Next: %v; want the message published once the queue was back", r.err)
			}
			if r.b == nil || r.b.Len() != 1 || string(r.b.Records()[0].Payload) != "back" {
				t.Fatalf("Next: %+v, want the one message published", r.b)
			}
		})
	}
}

// logWatch is a log handler sending each message's text to its channel
// (dropping it when the channel is full).
type logWatch chan string

func (h logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (h logWatch) Handle(_ context.Context, r slog.Record) error {
	select {
	case h <- r.Message:
	default:
	}
	return nil
}
func (h logWatch) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logWatch) WithGroup(string) slog.Handler      { return h }
