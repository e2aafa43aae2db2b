package nats

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// publishOrders publishes n orders to orders.new through JetStream, each
// with a Nats-Msg-Id (a UUID, as our sink writes it) when withID.
func publishOrders(t testing.TB, js jetstream.JetStream, n int, withID bool) map[string]string {
	t.Helper()
	ids := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range n {
		m := natsgo.NewMsg("orders.new")
		m.Data = []byte(fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, i, i))
		if withID {
			id := uuid.NewString()
			m.Header.Set(natsgo.MsgIdHdr, id)
			ids[fmt.Sprintf("o-%d", i)] = id
		}
		if _, err := js.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
		// Wait for the acks now and then: on a loaded machine they fall
		// behind, and past the client's pending limit it stalls.
		if (i+1)%2048 == 0 {
			waitPublished(ctx, t, js)
		}
	}
	waitPublished(ctx, t, js)
	return ids
}

func waitPublished(ctx context.Context, t testing.TB, js jetstream.JetStream) {
	t.Helper()
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publish acks did not arrive")
	}
}

func natsSQLitePlan(url, db string, batch, concurrency int, ackWait time.Duration) plan.Plan {
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "nats", Attrs: map[string]plan.Value{
			"url": plantest.Str(url), "subject": plantest.Str("orders.new"), "stream": plantest.Str("ORDERS"), "durable": plantest.Str("mqb-orders"),
			"source_metadata": {Type: plan.TBool, Bool: true},
			"ack_wait":        {Type: plan.TDuration, Str: ackWait.String(), Int: int64(ackWait)}}},
		{ID: "n1", Role: plan.RoleSink, Kind: "sql", Attrs: map[string]plan.Value{
			"url":          plantest.Tmpl(plantest.Lit("sqlite://" + db)),
			"create_table": plantest.Str(`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL, msgid TEXT, subject TEXT)`),
			"insert_query": plantest.Tmpl(plantest.Lit("INSERT INTO orders (id, amount, msgid, subject) VALUES ("), plantest.Ex(`payload.order_id`),
				plantest.Lit(", "), plantest.Ex("payload.amount"), plantest.Lit(", "), plantest.Ex("message_id"), plantest.Lit(", "), plantest.Ex(`meta["mqb.src.subject"]`),
				plantest.Lit(") ON CONFLICT (id) DO NOTHING")),
		}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "consume", Guarantee: plan.EffectivelyOnce,
		Concurrency: concurrency, BatchSize: batch, Nodes: nodes, Edges: plantest.Chain(nodes)}}}
}

func TestNATSSourceToSQLite(t *testing.T) {
	url := testsrv.NATS(t)
	_, js, _ := natsStream(t, url)
	d := t.TempDir()
	db := filepath.Join(d, "orders.db")
	const n = 5000
	ids := publishOrders(t, js, n, true)
	p := natsSQLitePlan(url, db, 256, 2, 30*time.Second)
	st := runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == n })
	runtest.CheckCounts(t, st.Route("consume"))
	runtest.CheckOrders(t, db, n)
	for id, mid := range runtest.SQLiteMap[string](t, db, `SELECT id, msgid FROM orders`) {
		if ids[id] != mid {
			t.Fatalf("%s: message_id %s, published with Nats-Msg-Id %s", id, mid, ids[id])
		}
	}
	for id, subject := range runtest.SQLiteMap[string](t, db, `SELECT id, subject FROM orders`) {
		if subject != "orders.new" {
			t.Fatalf("%s: mqb.src.subject %q", id, subject)
		}
	}
	// Every message was acked: the durable consumer has nothing pending,
	// and a second run reads nothing.
	if info := consumerInfo(t, js); info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("consumer after the run: ack pending %d, pending %d", info.NumAckPending, info.NumPending)
	}
	began := time.Now()
	st = runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return time.Since(began) > time.Second })
	if in := st.Route("consume").In; in != 0 {
		t.Errorf("second run read %d records, want 0", in)
	}
}

func consumerInfo(t testing.TB, js jetstream.JetStream) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, "ORDERS", "mqb-orders")
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestCrashNATSToSQLite: a JetStream durable consumer route SIGKILLed
// repeatedly (the server is in the test process and survives): every
// message lands once, and at the end nothing is left unacked.
func TestCrashNATSToSQLite(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	url := testsrv.NATS(t)
	_, js, _ := natsStream(t, url)
	d := t.TempDir()
	db := filepath.Join(d, "orders.db")
	const n = 100000
	publishOrders(t, js, n, false)
	// A short ack_wait: what was in flight at a kill is redelivered soon.
	// Done once every row is stored and the server has no message left
	// to (re)deliver: what the killed runs held unacked comes back after
	// ack_wait, and the final run must ack it (as a repeat) before it stops.
	st := runtest.CrashUntil(t, bin, natsSQLitePlan(url, db, 32, 1, 2*time.Second), d, 51, 4,
		func() bool {
			if runtest.CountRows(t, db) != n {
				return false
			}
			info := consumerInfo(t, js)
			return info.NumAckPending == 0 && info.NumPending == 0
		})
	rs := st.Route("consume")
	runtest.CheckCounts(t, rs)
	t.Logf("final run %+v", rs)
	runtest.CheckOrders(t, db, n)
	if info := consumerInfo(t, js); info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("consumer after the final run: ack pending %d, pending %d", info.NumAckPending, info.NumPending)
	}
}

func TestNATSMessageID(t *testing.T) {
	id := uuid.MustParse("0190f3a4-5b6c-7d8e-9f00-112233445566")
	h := natsgo.Header{}
	if _, ok := natsMessageID(h); ok {
		t.Error("no header: want no id (minted per read)")
	}
	h.Set(natsgo.MsgIdHdr, "order-17")
	a, _ := natsMessageID(h)
	b, _ := natsMessageID(h)
	if a != b || a == (uuid.UUID{}) {
		t.Errorf("a non-UUID Nats-Msg-Id must hash to one stable id: %s, %s", a, b)
	}
	h.Set(runtime.HeaderMessageID, id.String())
	if got, _ := natsMessageID(h); got != id {
		t.Errorf("mq_bridge.message_id wins: %s, want %s", got, id)
	}
}

// TestNATSSourceOutage: the server stops mid-run and starts again two
// seconds later on the same port and store. The source's connection
// reconnects and its consumer goes on; what was in flight, unacked, is
// redelivered after ack_wait; every order lands once and nothing is left
// unacked.
func TestNATSSourceOutage(t *testing.T) {
	srv := testsrv.NewNATS(t)
	_, js, _ := natsStream(t, srv.URL())
	db := filepath.Join(t.TempDir(), "orders.db")
	const n = 40000
	publishOrders(t, js, n, false)
	rs := runtest.Outage{
		Plan: natsSQLitePlan(srv.URL(), db, 64, 1, 2*time.Second), Route: "consume",
		Underway: func() bool { return runtest.CountRows(t, db) > 0 },
		Outage:   func() { srv.Restart(t, 2*time.Second) },
		Done: func() bool {
			if runtest.CountRows(t, db) != n {
				return false
			}
			// The test's own connection may still be reconnecting.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := js.Consumer(ctx, "ORDERS", "mqb-orders")
			if err != nil {
				return false
			}
			info, err := c.Info(ctx)
			return err == nil && info.NumAckPending == 0 && info.NumPending == 0
		},
		Expect: runtest.RidesThrough,
	}.Run(t)
	t.Logf("%+v", rs)
	runtest.CheckOrders(t, db, n)
}
