package amqp

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

// TestPremiseQueueKeepsMessages: a queue that can drop a message by
// itself (a TTL, an expiry, a head-dropping length limit, a delivery
// limit, a transient or auto-delete queue) refuses the route before its first record, naming what it found;
// a queue whose flags and arguments keep every message (a priority, dead
// letters, a length limit that refuses the publish instead, a quorum
// queue) runs and copies its messages. The queue is never created by the
// check: a missing one fails the start.
func TestPremiseQueueKeepsMessages(t *testing.T) {
	url := testsrv.RabbitMQ(t)
	for i, tc := range []struct {
		name                string
		durable, autoDelete bool
		args                amqp.Table
		refused             []string // what the refusal names; none: the route runs
	}{
		{name: "plain", durable: true},
		{name: "kept_args", durable: true, args: amqp.Table{"x-max-priority": int32(5), "x-dead-letter-exchange": "dlx", "x-max-length": int32(1000), "x-overflow": "reject-publish"}},
		{name: "quorum", durable: true, args: amqp.Table{"x-queue-type": "quorum"}},
		{name: "ttl", durable: true, args: amqp.Table{"x-message-ttl": int32(60000), "x-max-priority": int32(3)}, refused: []string{"x-message-ttl = 60000"}},
		{name: "expires", durable: true, args: amqp.Table{"x-expires": int64(3600000)}, refused: []string{"x-expires = 3600000"}},
		{name: "drop_head", durable: true, args: amqp.Table{"x-max-length": int32(10)}, refused: []string{"x-max-length = 10 with x-overflow drop-head"}},
		{name: "delivery_limit", durable: true, args: amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(3)}, refused: []string{"x-delivery-limit = 3"}},
		{name: "transient", refused: []string{"is not durable"}},
		{name: "auto_delete", durable: true, autoDelete: true, refused: []string{"is auto-delete"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := fmt.Sprintf("%s_%d_%s", queueName(t), i, tc.name)
			ch := testChannel(t, url)
			if _, err := ch.QueueDeclare(q, tc.durable, tc.autoDelete, false, false, tc.args); err != nil {
				t.Fatal(err)
			}
			publishOrders(t, url, q, 0, 3, true)
			db := filepath.Join(t.TempDir(), "orders.db")
			p := plantest.WithPremise(t, sqlitePlan(url, q, db, 16, 100, true), plan.Premise{Kind: plan.PremiseQueueKeepsMessages,
				When: plan.CheckStartup, Node: "n0", Target: q, Holds: "queue " + q + " drops no message", Reason: "source: amqp reads what the queue holds"})
			if len(tc.refused) > 0 {
				runtest.RunRefused(t, p, append(tc.refused, "queue "+q, "route consume"))
				if n := queueReady(t, url, q); n != 3 {
					t.Errorf("%d messages left in the queue after the refused start, want 3", n)
				}
				return
			}
			runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool {
				return plantest.TableExists(db, "orders") && runtest.CountRows(t, db) == 3
			})
		})
	}
	// A missing queue fails the start, and the check does not create it.
	q := queueName(t) + "_missing"
	p := plantest.WithPremise(t, sqlitePlan(url, q, filepath.Join(t.TempDir(), "o.db"), 16, 100, true), plan.Premise{Kind: plan.PremiseQueueKeepsMessages,
		When: plan.CheckStartup, Node: "n0", Target: q, Holds: "queue " + q + " drops no message", Reason: "source: amqp reads what the queue holds"})
	runtest.RunRefused(t, p, []string{q})
	ch := testChannel(t, url)
	if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err == nil {
		t.Errorf("queue %s exists after the refused start: the check created it", q)
	}
}

// TestQueueShapeDeliveryLimitDefault: RabbitMQ 4 gives a quorum queue a
// delivery limit of 20 when x-delivery-limit is not set, so there the
// queue's arguments say nothing and still a message redelivered often
// enough (a route that keeps stopping before it acks) is dropped; only
// x-delivery-limit = -1 keeps it. The broker of these tests is older, so
// this is the allow-list alone, on the shapes learnQueue reads.
func TestQueueShapeDeliveryLimitDefault(t *testing.T) {
	for _, tc := range []struct {
		version string
		args    amqp.Table
		drops   string // what drops says; "" when the queue keeps every message
	}{
		{"3.10.8", amqp.Table{"x-queue-type": "quorum"}, ""},
		{"4.0.5", amqp.Table{"x-queue-type": "quorum"}, "delivery limit of 20"},
		{"4.1.0", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(-1)}, ""},
		{"4.1.0", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(5)}, "x-delivery-limit = 5"},
		{"4.0.5", amqp.Table{"x-queue-type": "classic"}, ""},
		{"4.0.5", amqp.Table{}, ""},
		{"", amqp.Table{"x-queue-type": "quorum"}, ""},
	} {
		got := queueShape{durable: true, args: tc.args, version: tc.version}.drops()
		if (tc.drops == "") != (got == "") || !strings.Contains(got, tc.drops) {
			t.Errorf("RabbitMQ %q, %v: drops %q, want %q", tc.version, tc.args, got, tc.drops)
		}
	}
}
