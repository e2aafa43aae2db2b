package amqp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// sinkNode publishes on the default exchange with routing key key.
func sinkNode(url string, key ...plan.Part) plan.Node {
	return plan.Node{Kind: "amqp", Attrs: map[string]plan.Value{
		"url": plantest.Str(url), "routing_key": plantest.Tmpl(key...)}}
}

// consumeAll reads every message of queue (acking them) until it has n
// or none comes for a while.
func consumeAll(t testing.TB, url, queue string, n int) []amqp.Delivery {
	return readQueue(t, url, queue, n, true)
}

// readQueue reads the messages of queue until it has n or none comes for
// a while. With ack they are acked as they come, and a moment is waited
// for one past n (a duplicate); without, none is, and closing the
// connection puts every one back.
func readQueue(t testing.TB, url, queue string, n int, ack bool) []amqp.Delivery {
	t.Helper()
	c, ch := dialTest(t, url)
	defer c.Close()
	ds, err := ch.Consume(queue, "", ack, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []amqp.Delivery
	for len(out) < n {
		select {
		case d := <-ds:
			out = append(out, d)
		case <-time.After(5 * time.Second):
			return out
		}
	}
	if !ack {
		return out
	}
	// Anything past n is a duplicate: wait a moment for one.
	select {
	case d := <-ds:
		out = append(out, d)
	case <-time.After(500 * time.Millisecond):
	}
	return out
}

// file → amqp: every line is published once, persistent, with its
// message_id as the message_id property and mq_bridge.message_id header,
// and the route's meta as headers.
func TestAMQPSinkFromFile(t *testing.T) {
	url := testsrv.RabbitMQ(t)
	q := queueName(t)
	declareQueue(t, url, q)
	e := plantest.NewEnv(t)
	const n = 3000
	lines := plantest.WriteOrders(t, e.Input, n)
	rs := runtest.RunRoute(t, context.Background(), plantest.SinkPlan(e.Input, e.State, 128, sinkNode(url, plantest.Lit(q))), runtest.Options(), "publish")
	if rs.Out != n {
		t.Fatalf("stats %+v, want out %d", rs, n)
	}
	want := map[string]bool{}
	for _, l := range lines {
		want[l] = true
	}
	got := consumeAll(t, url, q, n)
	if len(got) != n {
		t.Errorf("queue gave %d messages, want %d", len(got), n)
	}
	for _, d := range got {
		delete(want, string(d.Body))
		if len(d.MessageId) != 36 || d.Headers[runtime.HeaderMessageID] != d.MessageId {
			t.Fatalf("message_id %q, %s header %v: want the same UUID", d.MessageId, runtime.HeaderMessageID, d.Headers[runtime.HeaderMessageID])
		}
		if d.DeliveryMode != amqp.Persistent {
			t.Fatalf("delivery mode %d, want persistent", d.DeliveryMode)
		}
		if id, _ := d.Headers["mqb.id"].(string); !strings.Contains(string(d.Body), `"`+id+`"`) {
			t.Fatalf("mqb.id header %q is not the order's id: %s", id, d.Body)
		}
	}
	if len(want) != 0 {
		t.Errorf("%d lines never published", len(want))
	}
}

// A record whose routing key reaches no queue is returned by the broker
// (the sink publishes mandatory): it goes to the DLQ with the reason,
// and the others are published.
func TestAMQPSinkUnroutableToDLQ(t *testing.T) {
	url := testsrv.RabbitMQ(t)
	q := queueName(t)
	declareQueue(t, url, q)
	e := plantest.NewEnv(t)
	const n = 200
	plantest.WriteOrders(t, e.Input, n)
	// o-1x… go to a queue that does not exist.
	sink := sinkNode(url, plantest.Ex(`payload.order_id startsWith "o-1" ? "`+q+`-missing" : "`+q+`"`))
	p := plantest.SinkPlan(e.Input, e.State, 32, sink)
	p = withDLQ(p, 2, e.DLQ)
	rs := runtest.RunRoute(t, context.Background(), p, runtest.Options(), "publish")
	const unroutable = 1 + 10 + 100 // o-1, o-10…o-19, o-100…o-199
	if rs.DeadLettered != unroutable || rs.Out != n-unroutable {
		t.Errorf("stats %+v, want %d dead-lettered and %d out", rs, unroutable, n-unroutable)
	}
	for _, l := range plantest.ReadDLQLines(t, e.DLQ) {
		if !strings.Contains(l.Error, "unroutable") || !strings.Contains(l.Error, q+"-missing") {
			t.Errorf("DLQ reason %q", l.Error)
		}
	}
	if got := consumeAll(t, url, q, n-unroutable); len(got) != n-unroutable {
		t.Errorf("queue gave %d messages, want %d", len(got), n-unroutable)
	}
}

// A missing exchange is refused at build, naming the attribute.
func TestAMQPSinkMissingExchange(t *testing.T) {
	url := testsrv.RabbitMQ(t)
	node := &plan.Node{Role: plan.RoleSink, Kind: "amqp", Attrs: map[string]plan.Value{
		"url": plantest.Str(url), "exchange": plantest.Str("no-such-exchange"), "routing_key": plantest.Str("k")}}
	_, err := runtime.BuildSink(context.Background(), "r", "", node, runtime.Options{})
	if err == nil || !strings.Contains(err.Error(), "exchange") || !strings.Contains(err.Error(), "no-such-exchange") {
		t.Fatalf("err %v, want one naming the exchange", err)
	}
}

// TestAMQPSinkOutage: file → queue while the broker is killed and
// started again two seconds later on its data. With a retry step the
// write in flight is published again on a new connection and the route
// rides through; without one the route stops with an error naming the
// sink, and a rerun from the committed position publishes the rest.
// Either way every order is in the queue, some twice (a queue cannot
// absorb a repeat: the route is at-least-once).
func TestAMQPSinkOutage(t *testing.T) {
	srv := testsrv.SharedRabbitMQ(t)
	url := srv.URL()
	cases := runtest.SinkOutageCases(runtest.Stops)
	// Every case's queue is declared first: a declaration younger than
	// this may not survive the kill.
	for _, tc := range cases {
		declareQueue(t, url, queueName(t)+"_"+tc.Name)
	}
	time.Sleep(testsrv.RabbitMetadataFlush)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			q := queueName(t)
			e := plantest.NewEnv(t)
			// Enough that the kill, as soon as the first messages are in
			// the queue, lands mid-stream (Outage fails the test if the
			// route was done first).
			const n = 10000
			plantest.WriteOrders(t, e.Input, n)
			p := plantest.SinkPlan(e.Input, e.State, 128, sinkNode(url, plantest.Lit(q)))
			if tc.Retry {
				// Enough attempts to outlast the broker's start-up on a
				// loaded machine.
				p = plantest.WithRetryAt(p, len(p.Routes[0].Nodes)-1, 600)
			}
			rs := runtest.Outage{
				Plan: p, Route: "publish",
				Underway: func() bool { return queueReady(t, url, q) > 0 },
				// The broker takes connections before it has recovered
				// the test's durable queue; the rerun of no_retry must not
				// find it missing (its records would be unroutable).
				Outage:   func() { srv.Kill(t); time.Sleep(2 * time.Second); srv.Start(t); waitQueue(t, url, q) },
				Expect:   tc.Expect,
				StopSays: []string{"route publish", "amqp sink"},
			}.Run(t)
			got := map[string]int{}
			// The route is done: the queue holds what it will.
			for _, d := range consumeAll(t, url, q, queueReady(t, url, q)) {
				var o struct {
					OrderID string `json:"order_id"`
				}
				if err := json.Unmarshal(d.Body, &o); err != nil {
					t.Fatalf("message %q: %v", d.Body, err)
				}
				got[o.OrderID]++
			}
			t.Logf("%d orders in the queue; %+v", len(got), rs)
			for i := range n {
				if got[fmt.Sprintf("o-%d", i)] == 0 {
					t.Fatalf("order o-%d is not in the queue (%d of %d are)", i, len(got), n)
				}
			}
		})
	}
}

// TestAMQPSinkReconnectWaitsForQueue: right after the sink connected
// again, a message routed nowhere may be for a queue the restarted
// broker has not recovered yet: the write fails retryably and refuses no
// record, and the retry once the queue is back publishes it. Past the
// window a return refuses the record again (TestAMQPSinkUnroutableToDLQ
// covers the first connection).
func TestAMQPSinkReconnectWaitsForQueue(t *testing.T) {
	url := testsrv.RabbitMQ(t)
	q := queueName(t)
	ch := declareQueue(t, url, q)
	node := sinkNode(url, plantest.Lit(q))
	node.Role = plan.RoleSink
	built, err := runtime.BuildSink(context.Background(), "r", "text", &node, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := built.(*sink)
	defer s.Close()
	ctx := context.Background()
	rec := func(body string) []*runtime.Record { return []*runtime.Record{{Payload: []byte(body)}} }
	if err := s.Write(ctx, rec("first")); err != nil {
		t.Fatal(err)
	}
	// The connection is lost while the queue is gone (as after a restart
	// of a broker still recovering it).
	s.conn.Close()
	if _, err := ch.QueueDelete(q, false, false, false); err != nil {
		t.Fatal(err)
	}
	recs := rec("second")
	err = s.Write(ctx, recs)
	if err == nil || !runtime.IsRetryable(err) || !strings.Contains(err.Error(), "recovering") {
		t.Fatalf("write after reconnecting to a broker without the queue: %v (refused: %q); want a retryable error", err, recs[0].Refused())
	}
	if why := recs[0].Refused(); why != "" {
		t.Fatalf("record refused (%s); want it retried", why)
	}
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, recs); err != nil || recs[0].Refused() != "" {
		t.Fatalf("retry once the queue is back: %v, refused %q", err, recs[0].Refused())
	}
	if got := consumeAll(t, url, q, 1); len(got) != 1 || string(got[0].Body) != "second" {
		t.Fatalf("queue holds %d messages, want the one retried", len(got))
	}
	// Past the window the broker's return is believed.
	s.reconnected = time.Now().Add(-s.recoveryWindow)
	recs = rec("third")
	if _, err := ch.QueueDelete(q, false, false, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, recs); err != nil || !strings.Contains(recs[0].Refused(), "unroutable") {
		t.Fatalf("write past the window: %v, refused %q; want the record refused unroutable", err, recs[0].Refused())
	}
}
