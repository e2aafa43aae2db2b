package amqp

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
)

// queueName is a queue of the test's own on the shared node.
func queueName(t testing.TB) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
}

// testChannel is a channel of a connection of the test's own, closed
// when the test ends.
func testChannel(t testing.TB, url string) *amqp.Channel {
	t.Helper()
	c, ch := dialTest(t, url)
	t.Cleanup(func() { c.Close() })
	return ch
}

// dialTest opens a connection and a channel on it; the caller closes the
// connection.
func dialTest(t testing.TB, url string) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	c, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.Channel()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c, ch
}

// withDLQ puts a dlq step writing to the file dlq after the source of
// p's route.
func withDLQ(p plan.Plan, at int, dlq string) plan.Plan {
	nodes := p.Routes[0].Nodes
	p.Routes[0].Nodes = append(append(nodes[:at:at], plantest.DLQFile("d", dlq, "")), nodes[at:]...)
	p.Routes[0].Edges = plantest.Chain(p.Routes[0].Nodes)
	return p
}

// declareQueue declares a durable queue, emptied and deleted when the
// test ends, and returns a channel for the test's own use.
func declareQueue(t testing.TB, url, queue string) *amqp.Channel {
	t.Helper()
	ch := testChannel(t, url)
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := amqp.Dial(url); err == nil {
			if ch, err := c.Channel(); err == nil {
				ch.QueueDelete(queue, false, false, false)
			}
			c.Close()
		}
	})
	return ch
}

// publishOrders publishes n persistent orders to queue under publisher
// confirms, each stamped with a UUID message_id when withID; it returns
// order id → message_id.
func publishOrders(t testing.TB, url, queue string, from, n int, withID bool) map[string]string {
	t.Helper()
	ids := map[string]string{}
	publish(t, url, queue, orders(from, n, withID, ids))
	return ids
}

// orders are the persistent orders from…from+n-1, each stamped with a
// UUID message_id when withID, recorded in ids (order id → message_id).
func orders(from, n int, withID bool, ids map[string]string) iter.Seq[amqp.Publishing] {
	return func(yield func(amqp.Publishing) bool) {
		for i := from; i < from+n; i++ {
			m := amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, i, i))}
			if withID {
				m.MessageId = uuid.NewString()
				ids[fmt.Sprintf("o-%d", i)] = m.MessageId
			}
			if !yield(m) {
				return
			}
		}
	}
}

// publish publishes msgs to queue on the default exchange, mandatory and
// under publisher confirms, and fails the test unless the broker
// confirmed every one and returned none: a message no queue took (the
// queue missing, or not yet recovered after a restart) would otherwise
// be confirmed and lost without a word.
func publish(t testing.TB, url, queue string, msgs iter.Seq[amqp.Publishing]) {
	t.Helper()
	if err := publishAll(url, queue, msgs); err != nil {
		t.Fatal(err)
	}
}

// publishAll is publish returning what went wrong, for a goroutine of
// the test's.
func publishAll(url, queue string, msgs iter.Seq[amqp.Publishing]) error {
	c, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	const window = 1024 // confirms awaited at a time; the returns buffer holds as many
	returns := ch.NotifyReturn(make(chan amqp.Return, window))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pending := make([]*amqp.DeferredConfirmation, 0, window)
	wait := func() error {
		for _, dc := range pending {
			if ok, err := dc.WaitContext(ctx); err != nil || !ok {
				return fmt.Errorf("publish to queue %s not confirmed: %v", queue, err)
			}
		}
		pending = pending[:0]
		// A return comes before its message's confirm: every return of
		// the messages confirmed is buffered by now.
		select {
		case r := <-returns:
			return fmt.Errorf("publish to queue %s: the broker returned a message unroutable: %d %s", queue, r.ReplyCode, r.ReplyText)
		default:
		}
		return nil
	}
	for m := range msgs {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, m)
		if err != nil {
			return err
		}
		if pending = append(pending, dc); len(pending) == window {
			if err := wait(); err != nil {
				return err
			}
		}
	}
	return wait()
}

// waitQueue waits until the broker, restarted, has queue again (a
// passive declare succeeds): it accepts connections before it has
// recovered its durable queues.
func waitQueue(t testing.TB, url, queue string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := func() error {
			c, err := amqp.Dial(url)
			if err != nil {
				return err
			}
			defer c.Close()
			ch, err := c.Channel()
			if err != nil {
				return err
			}
			_, err = ch.QueueDeclarePassive(queue, true, false, false, false, nil)
			return err
		}()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s not back a minute after the broker's restart: %v", queue, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// queueReady is how many messages queue holds ready for delivery (not
// counting those delivered to a consumer and not yet acked: once the
// consumer's connection closes, the broker puts those back).
func queueReady(t testing.TB, url, queue string) int {
	t.Helper()
	c, ch := dialTest(t, url)
	defer c.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// sqlitePlan is the route "consume": queue into the orders table of db
// (ON CONFLICT (id) DO NOTHING), with producer_ids as given.
func sqlitePlan(url, queue, db string, batch, prefetch int, producerIDs bool) plan.Plan {
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "amqp", Attrs: map[string]plan.Value{
			"url": plantest.Str(url), "queue": plantest.Str(queue), "prefetch": plantest.Int(int64(prefetch)),
			"producer_ids":    {Type: plan.TBool, Bool: producerIDs},
			"source_metadata": {Type: plan.TBool, Bool: true}}},
		{ID: "n1", Role: plan.RoleSink, Kind: "sql", Attrs: map[string]plan.Value{
			"url":          plantest.Tmpl(plantest.Lit("sqlite://" + db)),
			"create_table": plantest.Str(`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL, msgid TEXT, rk TEXT)`),
			"insert_query": plantest.Tmpl(plantest.Lit("INSERT INTO orders (id, amount, msgid, rk) VALUES ("), plantest.Ex(`payload.order_id`),
				plantest.Lit(", "), plantest.Ex("payload.amount"), plantest.Lit(", "), plantest.Ex("message_id"), plantest.Lit(", "), plantest.Ex(`meta["mqb.src.routing_key"]`),
				plantest.Lit(") ON CONFLICT (id) DO NOTHING")),
		}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "consume", Guarantee: plan.EffectivelyOnce,
		Concurrency: 1, BatchSize: batch, Nodes: nodes, Edges: plantest.Chain(nodes)}}}
}
