package nats

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	natsgo "github.com/nats-io/nats.go"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

// TestPremiseProducerIDNATS: with a producer_id premise, a JetStream
// message without Nats-Msg-Id goes to the DLQ with the reason; the
// stamped ones are written.
func TestPremiseProducerIDNATS(t *testing.T) {
	url := testsrv.NATS(t)
	_, js, _ := natsStream(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 6 {
		m := natsgo.NewMsg("orders.new")
		m.Data = []byte(fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, i, i))
		if i%2 == 0 {
			m.Header.Set(natsgo.MsgIdHdr, uuid.NewString())
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	d := t.TempDir()
	db, dlq := filepath.Join(d, "orders.db"), filepath.Join(d, "dlq.jsonl")
	p := natsSQLitePlan(url, db, 16, 1, 30*time.Second)
	nodes := p.Routes[0].Nodes
	p.Routes[0].Nodes = []plan.Node{nodes[0], plantest.DLQFile("d", dlq, ""), nodes[1]}
	p.Routes[0].Edges = plantest.Chain(p.Routes[0].Nodes)
	p = plantest.WithPremise(t, p, plan.Premise{Kind: plan.PremiseProducerID, When: plan.CheckPerRecord, Node: "n0",
		Holds: "every message carries a Nats-Msg-Id", Reason: "dedup: key message_id"})
	st := runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 3 && len(plantest.ReadDLQLines(t, dlq)) == 3 })
	runtest.CheckCounts(t, st.Route("consume"))
	for id := range runtest.SQLiteMap[string](t, db, `SELECT id, msgid FROM orders`) {
		if n, _ := strconv.Atoi(strings.TrimPrefix(id, "o-")); n%2 != 0 {
			t.Errorf("order %s has no Nats-Msg-Id but was written", id)
		}
	}
	for _, l := range plantest.ReadDLQLines(t, dlq) {
		if !strings.Contains(l.Error, "no producer-stamped id") || !strings.Contains(l.Error, "dedup: key message_id") {
			t.Errorf("DLQ reason %q", l.Error)
		}
	}
}
