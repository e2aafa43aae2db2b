package nats

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// benchRecords is how many messages the NATS benchmarks move.
const benchRecords = 20000

// freshOrders deletes the ORDERS stream, makes it again and publishes
// benchRecords orders to it.
func freshOrders(b *testing.B, js jetstream.JetStream, url string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, "ORDERS"); err != nil && err != jetstream.ErrStreamNotFound {
		b.Fatal(err)
	}
	natsStream(b, url)
	publishOrders(b, js, benchRecords, false)
}

// BenchmarkNATSSourceToSQLite: nats (a JetStream durable consumer, acks
// after commit) → SQLite (ON CONFLICT (id) DO NOTHING), from a stream
// holding the orders until the table has them all.
func BenchmarkNATSSourceToSQLite(b *testing.B) {
	url := testsrv.NATS(b)
	_, js := jetStreamOf(b, url)
	opts := runtime.Options{Logger: slog.New(slog.DiscardHandler)}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		freshOrders(b, js, url)
		db := filepath.Join(b.TempDir(), "orders.db")
		b.StartTimer()
		bg := runtest.Start(context.Background(), natsSQLitePlan(url, db, 1024, 1, 30*time.Second), opts)
		if !plantest.WaitFor(func() bool { return runtest.CountRows(b, db) == benchRecords }, 5*time.Minute, 5*time.Millisecond) {
			b.Fatalf("%d rows after 5 minutes, want %d", runtest.CountRows(b, db), benchRecords)
		}
		bg.Stop(b)
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkNATSClientConsume is the baseline of
// BenchmarkNATSSourceToSQLite: the Go client alone consuming the same
// stream through a durable consumer with explicit acks, each message
// acked as it arrives, writing nothing.
func BenchmarkNATSClientConsume(b *testing.B) {
	url := testsrv.NATS(b)
	_, js := jetStreamOf(b, url)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		freshOrders(b, js, url)
		b.StartTimer()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cons, err := js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "plain", FilterSubject: "orders.new",
			AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy, MaxAckPending: 1 << 16})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan struct{})
		n := 0
		cc, err := cons.Consume(func(m jetstream.Msg) {
			m.Ack()
			if n++; n == benchRecords {
				close(done)
			}
		}, jetstream.PullMaxMessages(2048))
		if err != nil {
			b.Fatal(err)
		}
		select {
		case <-done:
		case <-ctx.Done():
			b.Fatalf("received %d of %d", n, benchRecords)
		}
		cc.Stop()
		cancel()
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkNATSSink: file → nats (JetStream publishes, each with its
// Nats-Msg-Id, a write returning once the stream acknowledged them all).
func BenchmarkNATSSink(b *testing.B) {
	url := testsrv.NATS(b)
	_, js := jetStreamOf(b, url)
	natsStream(b, url)
	input, size := plantest.BenchInput(b, benchRecords)
	runtest.Bench(b, benchRecords, size, func(i int, state string) plan.Plan {
		return plantest.SinkPlan(input, state, 1024, plan.Node{Kind: "nats", Attrs: map[string]plan.Value{
			"url": plantest.Str(url), "subject": plantest.Str("orders.bench"), "stream": plantest.Str("ORDERS")}})
	})
	purge(b, js)
}

// BenchmarkNATSClientPublish is the baseline of BenchmarkNATSSink: the Go
// client alone publishing as many messages asynchronously, each with a
// Nats-Msg-Id, waiting for every acknowledgement.
func BenchmarkNATSClientPublish(b *testing.B) {
	url := testsrv.NATS(b)
	_, js := jetStreamOf(b, url)
	natsStream(b, url)
	body := []byte(`{"order_id":"o-00000","amount":12345,"note":"a benchmark order with some padding to look like a real one"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b.ResetTimer()
	for range b.N {
		for i := range benchRecords {
			m := natsgo.NewMsg("orders.plain")
			m.Data = body
			m.Header.Set(natsgo.MsgIdHdr, uuid.NewString())
			if _, err := js.PublishMsgAsync(m); err != nil {
				b.Fatal(err)
			}
			if (i+1)%2048 == 0 {
				waitPublished(ctx, b, js)
			}
		}
		waitPublished(ctx, b, js)
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	purge(b, js)
}

// purge empties the ORDERS stream.
func purge(b *testing.B, js jetstream.JetStream) {
	st, err := js.Stream(context.Background(), "ORDERS")
	if err == nil {
		err = st.Purge(context.Background())
	}
	if err != nil {
		b.Fatal(err)
	}
}
