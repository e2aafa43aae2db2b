package testsrv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// Durable queues and persistent messages survive a graceful restart and
// a kill of the node on the same port and data, and they are there as
// soon as Start returns: the node answers before it has recovered its
// queues (NOT_FOUND for one that exists, NO_ROUTE for a publish), so
// Start waits for that. Many queues make the recovery long enough to
// see.
func TestRabbitMQRestart(t *testing.T) {
	start := time.Now()
	r := testsrv.NewRabbitMQ(t)
	t.Logf("RabbitMQ ready in %s: %s", time.Since(start), r.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const queues, bulk = 100, 20000
	for _, down := range testsrv.Downs {
		ch := rabbitChannel(t, r.URL())
		declared := time.Now()
		for i := range queues {
			q := fmt.Sprintf("kept-%s-%d", down.Name, i)
			if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
			if err := ch.PublishWithContext(ctx, "", q, true, false, amqp.Publishing{Body: []byte(q), DeliveryMode: amqp.Persistent}); err != nil {
				t.Fatal(err)
			}
		}
		// The persistent messages are on disk once confirmed: a queue's
		// messages are confirmed in order, so a confirmed publish to
		// each queue covers the one before it.
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		returns := ch.NotifyReturn(make(chan amqp.Return, 1))
		for i := range queues {
			q := fmt.Sprintf("kept-%s-%d", down.Name, i)
			publishConfirmed(ctx, t, ch, returns, q, "confirmed")
		}
		// Many messages more in the first queue: a message store to
		// recover (after a kill, by reading it) makes the recovery long.
		var dcs []*amqp.DeferredConfirmation
		for range bulk {
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", fmt.Sprintf("kept-%s-0", down.Name), true, false,
				amqp.Publishing{Body: make([]byte, 1000), DeliveryMode: amqp.Persistent})
			if err != nil {
				t.Fatal(err)
			}
			dcs = append(dcs, dc)
		}
		for _, dc := range dcs {
			if ok, err := dc.WaitContext(ctx); err != nil || !ok {
				t.Fatalf("bulk publish not confirmed: %v", err)
			}
		}
		// The queues' declarations written out (the publishes took part
		// of the time).
		time.Sleep(time.Until(declared.Add(testsrv.RabbitMetadataFlush)))
		began := time.Now()
		down.Outage(t, r, 0)
		t.Logf("%s: back in %s", down.Name, time.Since(began))
		ch = rabbitChannel(t, r.URL())
		for i := range queues {
			q := fmt.Sprintf("kept-%s-%d", down.Name, i)
			m, ok, err := ch.Get(q, true)
			if err != nil || !ok || string(m.Body) != q {
				t.Fatalf("after the %s: queue %s gave %q, %v, %v; want its persistent message", down.Name, q, m.Body, ok, err)
			}
		}
		fresh := "fresh-" + down.Name
		if _, err := ch.QueueDeclare(fresh, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		publishConfirmed(ctx, t, ch, ch.NotifyReturn(make(chan amqp.Return, 1)), fresh, "fresh")
	}
}

// rabbitChannel is a channel of a new connection to url, closed when the
// test ends.
func rabbitChannel(t *testing.T, url string) *amqp.Channel {
	t.Helper()
	c, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// publishConfirmed publishes body to queue, mandatory, on ch (in confirm
// mode, its returns coming on returns) and fails the test unless the
// broker confirms it without returning it.
func publishConfirmed(ctx context.Context, t *testing.T, ch *amqp.Channel, returns <-chan amqp.Return, queue, body string) {
	t.Helper()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{Body: []byte(body), DeliveryMode: amqp.Persistent})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(ctx); err != nil || !ok {
		t.Fatalf("publish to %s not confirmed: %v", queue, err)
	}
	select {
	case r := <-returns: // a return comes before its confirm
		t.Fatalf("publish to %s returned: %d %s", queue, r.ReplyCode, r.ReplyText)
	default:
	}
}
