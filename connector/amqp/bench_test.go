package amqp

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

const benchRecords = 20000

// purge empties queue between iterations.
func purge(b *testing.B, ch *amqp.Channel, queue string) {
	if _, err := ch.QueuePurge(queue, false); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAMQPSink: file → id → amqp, persistent publishes to a durable
// queue under publisher confirms, a batch of 1024 waiting for its confirms.
func BenchmarkAMQPSink(b *testing.B) {
	url := testsrv.RabbitMQ(b)
	q := queueName(b)
	ch := declareQueue(b, url, q)
	input, size := plantest.BenchInput(b, benchRecords)
	runtest.Bench(b, benchRecords, size, func(i int, state string) plan.Plan {
		purge(b, ch, q)
		return plantest.SinkPlan(input, state, 1024, sinkNode(url, plantest.Lit(q)))
	})
}

// BenchmarkAMQPClientPublish is the baseline of BenchmarkAMQPSink: the
// Go client alone publishing the same number of persistent messages to a
// durable queue under publisher confirms, 1024 in flight at a time.
func BenchmarkAMQPClientPublish(b *testing.B) {
	url := testsrv.RabbitMQ(b)
	q := queueName(b)
	ch := declareQueue(b, url, q)
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"order_id":"o-00000","amount":12345,"note":"a benchmark order with some padding to look like a real one"}`)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		purge(b, ch, q)
		b.StartTimer()
		dcs := make([]*amqp.DeferredConfirmation, 0, 1024)
		for i := range benchRecords {
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, true, false,
				amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: "m", Body: body})
			if err != nil {
				b.Fatal(err)
			}
			dcs = append(dcs, dc)
			if len(dcs) == cap(dcs) || i == benchRecords-1 {
				for _, dc := range dcs {
					if !dc.Wait() {
						b.Fatal("nacked")
					}
				}
				dcs = dcs[:0]
			}
		}
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAMQPSourceToSQLite: amqp (prefetch 4096, acks after commit) →
// SQLite (ON CONFLICT (id) DO NOTHING), from a queue holding the orders
// until the table has them all.
func BenchmarkAMQPSourceToSQLite(b *testing.B) {
	url := testsrv.RabbitMQ(b)
	q := queueName(b)
	ch := declareQueue(b, url, q)
	opts := runtime.Options{Logger: slog.New(slog.DiscardHandler)}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		purge(b, ch, q)
		publishOrders(b, url, q, 0, benchRecords, false)
		db := filepath.Join(b.TempDir(), "orders.db")
		b.StartTimer()
		bg := runtest.Start(context.Background(), sqlitePlan(url, q, db, 1024, 4096, false), opts)
		if !plantest.WaitFor(func() bool { return runtest.CountRows(b, db) == benchRecords }, 5*time.Minute, 5*time.Millisecond) {
			b.Fatalf("%d rows after 5 minutes, want %d", runtest.CountRows(b, db), benchRecords)
		}
		bg.Stop(b)
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAMQPClientConsume is the baseline of
// BenchmarkAMQPSourceToSQLite: the Go client alone consuming the same
// queue with manual acks (one multiple ack per 1024), writing nothing.
func BenchmarkAMQPClientConsume(b *testing.B) {
	url := testsrv.RabbitMQ(b)
	q := queueName(b)
	ch := declareQueue(b, url, q)
	if err := ch.Qos(4096, 0, false); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		purge(b, ch, q)
		publishOrders(b, url, q, 0, benchRecords, false)
		b.StartTimer()
		tag := "bench" + string(rune('a'+i%26))
		ds, err := ch.Consume(q, tag, false, false, false, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		for n := 1; n <= benchRecords; n++ {
			d := <-ds
			if n%1024 == 0 || n == benchRecords {
				if err := ch.Ack(d.DeliveryTag, true); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := ch.Cancel(tag, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
