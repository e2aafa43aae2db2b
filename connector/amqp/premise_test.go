package amqp

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

func amqpText(body string) amqp.Publishing {
	return amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(body)}
}

// TestPremiseProducerIDAMQP: with a producer_id premise, a message with
// neither a message_id property nor an mq_bridge.message_id header goes
// to the DLQ with the reason; the stamped ones (either way) are written.
func TestPremiseProducerIDAMQP(t *testing.T) {
	url := testsrv.RabbitMQ(t)
	q := queueName(t)
	declareQueue(t, url, q)
	var msgs []amqp.Publishing
	for i := range 6 {
		m := amqpText(fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, i, i))
		switch i % 3 {
		case 0:
			m.MessageId = fmt.Sprintf("order-%d", i) // not a UUID: hashed into one
		case 1:
			m.Headers = amqp.Table{runtime.HeaderMessageID: uuid.NewString()}
		}
		msgs = append(msgs, m)
	}
	publish(t, url, q, slices.Values(msgs))
	d := t.TempDir()
	db, dlq := filepath.Join(d, "orders.db"), filepath.Join(d, "dlq.jsonl")
	p := sqlitePlan(url, q, db, 16, 100, true)
	p = withDLQ(p, 1, dlq)
	p = plantest.WithPremise(t, p, plan.Premise{Kind: plan.PremiseProducerID, When: plan.CheckPerRecord, Node: "n0",
		Holds: "every message carries a message_id", Reason: "dedup: key message_id"})
	st := runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool {
		return runtest.CountRows(t, db) == 4 && len(plantest.ReadDLQLines(t, dlq)) == 2
	})
	runtest.CheckCounts(t, st.Route("consume"))
	for id, mid := range runtest.SQLiteMap[string](t, db, `SELECT id, msgid FROM orders`) {
		n, _ := strconv.Atoi(strings.TrimPrefix(id, "o-"))
		if n%3 == 2 {
			t.Errorf("order %s has no producer id but was written", id)
		}
		if n%3 == 0 && mid != uuid.NewSHA1(idSpace, []byte(fmt.Sprintf("order-%d", n))).String() {
			t.Errorf("order %s: message_id %s is not the hash of its message_id property", id, mid)
		}
	}
	for _, l := range plantest.ReadDLQLines(t, dlq) {
		if !strings.Contains(l.Error, "no producer-stamped id") || !strings.Contains(l.Error, "dedup: key message_id") {
			t.Errorf("DLQ reason %q", l.Error)
		}
	}
}

func TestMessageID(t *testing.T) {
	id := uuid.MustParse("0190f3a4-5b6c-7d8e-9f00-112233445566")
	d := &amqp.Delivery{}
	if _, ok := messageID(d); ok {
		t.Error("no property, no header: want no id (minted per read)")
	}
	d.MessageId = "order-17"
	a, _ := messageID(d)
	b, _ := messageID(d)
	if a != b || a == (uuid.UUID{}) {
		t.Errorf("a non-UUID message_id must hash to one stable id: %s, %s", a, b)
	}
	d.Headers = amqp.Table{runtime.HeaderMessageID: id.String()}
	if got, _ := messageID(d); got != id {
		t.Errorf("mq_bridge.message_id wins: %s, want %s", got, id)
	}
}
