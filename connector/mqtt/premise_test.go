package mqtt

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// TestPremiseProducerIDMQTT: with a producer_id premise, a message without
// the user property mq_bridge.message_id goes to the DLQ with the reason;
// the stamped ones are written.
func TestPremiseProducerIDMQTT(t *testing.T) {
	url := testsrv.Mosquitto(t)
	topic, id := "orders/"+t.Name(), "mqb-"+t.Name()
	d := t.TempDir()
	db, dlq := filepath.Join(d, "orders.db"), filepath.Join(d, "dlq.jsonl")
	p := sqlitePlan(url, topic, id, db, 16)
	nodes := p.Routes[0].Nodes
	p.Routes[0].Nodes = []plan.Node{nodes[0], plantest.DLQFile("d", dlq, ""), nodes[1]}
	p.Routes[0].Edges = plantest.Chain(p.Routes[0].Nodes)
	p = plantest.WithPremise(t, p, plan.Premise{Kind: plan.PremiseProducerID, When: plan.CheckPerRecord, Node: "n0",
		Holds: "every message carries mq_bridge.message_id", Reason: "dedup: key message_id"})
	createSession(t, url, id, topic)
	c := client(t, url, nil)
	for i := range 6 {
		m := &paho.Publish{QoS: 1, Topic: topic, Payload: []byte(fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, i, i))}
		if i%2 == 0 {
			m.Properties = &paho.PublishProperties{User: paho.UserProperties{{Key: runtime.HeaderMessageID, Value: uuid.NewString()}}}
		}
		if _, err := c.Publish(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	st := runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool {
		return runtest.CountRows(t, db) == 3 && len(plantest.ReadDLQLines(t, dlq)) == 3
	})
	runtest.CheckCounts(t, st.Route("consume"))
	for id := range runtest.SQLiteMap[int](t, db, `SELECT id, amount FROM orders`) {
		if n, _ := strconv.Atoi(strings.TrimPrefix(id, "o-")); n%2 != 0 {
			t.Errorf("order %s has no producer id but was written", id)
		}
	}
	for _, l := range plantest.ReadDLQLines(t, dlq) {
		if !strings.Contains(l.Error, "no producer-stamped id") || !strings.Contains(l.Error, "dedup: key message_id") {
			t.Errorf("DLQ reason %q", l.Error)
		}
	}
}
