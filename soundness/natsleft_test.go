//go:build soundness

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// What a JetStream run left for its routes: a durable never created has
// the whole stream ahead, one created has its undelivered and its
// unacknowledged messages.
func TestNATSLeft(t *testing.T) {
	c := &Case{Input: strings.Repeat(`{"id":"k"}`+"\n", 10)}
	env, stop, err := startNATS(t.TempDir(), c)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	url := strings.TrimPrefix(env[0], natsURLEnv+"=")
	left := natsLeft(url, []string{"left_a", "left_b"})
	if n, err := left(); n != 20 || err != nil {
		t.Errorf("left with no consumer created: %d, %v; want 20", n, err)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	consume := func(name string, fetch, ack int) {
		t.Helper()
		cons, err := js.CreateOrUpdateConsumer(ctx, "IN", jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if fetch == 0 {
			return
		}
		batch, err := cons.Fetch(fetch, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for m := range batch.Messages() {
			if i < ack {
				if err := m.DoubleAck(ctx); err != nil {
					t.Fatal(err)
				}
			}
			i++
		}
		if i != fetch {
			t.Fatalf("fetched %d of %d", i, fetch)
		}
	}
	consume("left_a", 4, 1) // 6 undelivered, 3 unacknowledged
	if n, err := left(); n != 9+10 || err != nil {
		t.Errorf("left with a partly read: %d, %v; want 19", n, err)
	}
	consume("left_b", 10, 10)
	if n, err := left(); n != 9 || err != nil {
		t.Errorf("left with b done: %d, %v; want 9", n, err)
	}
}
