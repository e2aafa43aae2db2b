package testsrv_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

func TestNATS(t *testing.T) {
	start := time.Now()
	srv := testsrv.NewNATS(t)
	t.Logf("NATS ready in %s: %s", time.Since(start), srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "orders.new", []byte("one")); err != nil {
		t.Fatal(err)
	}

	// The stream survives a restart on the same port and store.
	srv.Restart(t, 100*time.Millisecond)
	if _, err := js.Publish(ctx, "orders.new", []byte("two")); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for msg := range batch.Messages() {
		got = append(got, string(msg.Data()))
		if err := msg.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Fatalf("consumed %q", got)
	}
}
