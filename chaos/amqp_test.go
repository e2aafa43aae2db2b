//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// amqpQueue declares a durable queue on the shared RabbitMQ node, deleted
// when the test ends, and returns a connection for the test's own use.
func amqpQueue(t *testing.T, url, queue string) *amqp.Connection {
	t.Helper()
	c, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch, err := c.Channel(); err == nil {
			ch.QueueDelete(queue, false, false, false)
		}
		c.Close()
	})
	return c
}

// amqpSource is a queue the route consumes; the input is published to it
// persistent, under publisher confirms.
var amqpSource = sourceCase{name: "amqp", follows: true, setup: func(t *testing.T, dir string) sourceSetup {
	url := testsrv.RabbitMQ(t)
	c := amqpQueue(t, url, "chaos_in")
	return sourceSetup{from: fmt.Sprintf(`amqp { url = %q, queue = "chaos_in", prefetch = 500 }`, url),
		emit: func(t *testing.T, lines string) { amqpPublish(t, c, "chaos_in", lines) }}
}}

// amqpPublish publishes each line of lines to queue and waits for the
// broker's confirms.
func amqpPublish(t *testing.T, c *amqp.Connection, queue, lines string) {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var dcs []*amqp.DeferredConfirmation
	for _, l := range strings.Split(strings.TrimSuffix(lines, "\n"), "\n") {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(l)})
		if err != nil {
			t.Fatal(err)
		}
		dcs = append(dcs, dc)
	}
	for _, dc := range dcs {
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("RabbitMQ did not confirm the published input: %v", err)
		}
	}
}

// amqpSink publishes into a queue through the default exchange; reading
// it drains the queue into a count kept across reads.
var amqpSink = sinkCase{"amqp", atLeastOnce, false, func(t *testing.T, dir string) (string, []string, func(*testing.T) map[string]int) {
	url := testsrv.RabbitMQ(t)
	c := amqpQueue(t, url, "chaos_out")
	got := map[string]int{}
	to := fmt.Sprintf(`amqp { url = %q, routing_key = "chaos_out" }`, url)
	return to, nil, func(t *testing.T) map[string]int {
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		for {
			m, ok, err := ch.Get("chaos_out", true)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return maps.Clone(got)
			}
			countIDs(t, "queue chaos_out", m.Body, got)
		}
	}
}}
