package testsrv_test

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// A durable queue and a persistent message survive a graceful restart
// of the node on the same port and data.
func TestRabbitMQRestart(t *testing.T) {
	start := time.Now()
	r := testsrv.NewRabbitMQ(t)
	t.Logf("RabbitMQ ready in %s: %s", time.Since(start), r.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := amqp.Dial(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("kept", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.PublishWithContext(ctx, "", "kept", false, false, amqp.Publishing{Body: []byte("one"), DeliveryMode: amqp.Persistent}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	r.Restart(t, 0)
	c, err = amqp.Dial(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err = c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	m, ok, err := ch.Get("kept", true)
	if err != nil || !ok || string(m.Body) != "one" {
		t.Fatalf("after the restart: %q, %v, %v; want the persistent message", m.Body, ok, err)
	}
}
