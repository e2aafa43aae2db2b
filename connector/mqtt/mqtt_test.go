package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
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

func TestMain(m *testing.M) { testsrv.Main(m) }

// client is a connected MQTT 5 client of the test's own, with msgs fed
// by every message it receives.
func client(t testing.TB, url string, msgs chan *paho.Publish) *paho.Client {
	t.Helper()
	cfg := paho.ClientConfig{}
	if msgs != nil {
		cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			msgs <- pr.Packet
			return true, nil
		}}
	}
	c, err := connect(context.Background(), url, cfg, &paho.Connect{ClientID: "test-" + uuid.NewString(), KeepAlive: 30, CleanStart: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(&paho.Disconnect{}) })
	return c
}

// publishOrders publishes orders from…from+n-1 at QoS 1, each with an
// mq_bridge.message_id user property when withID.
func publishOrders(t testing.TB, c *paho.Client, topic string, from, n int, withID bool) {
	t.Helper()
	if err := publishAll(c, topic, from, n, withID); err != nil {
		t.Fatal(err)
	}
}

// publishAll is publishOrders returning what went wrong, for a goroutine
// of the test's.
func publishAll(c *paho.Client, topic string, from, n int, withID bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := from; i < from+n; i++ {
		p := &paho.Publish{QoS: 1, Topic: topic, Payload: []byte(fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, i, i))}
		if withID {
			p.Properties = &paho.PublishProperties{User: paho.UserProperties{{Key: runtime.HeaderMessageID, Value: uuid.NewString()}}}
		}
		if _, err := c.Publish(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// createSession subscribes clientID to topic at QoS 1 in a persistent
// session and disconnects: the broker queues what is published next for
// the route that resumes the session.
func createSession(t testing.TB, url, clientID, topic string) {
	t.Helper()
	expiry := uint32(3600)
	c, err := connect(context.Background(), url, paho.ClientConfig{},
		&paho.Connect{ClientID: clientID, KeepAlive: 30, Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe(context.Background(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Disconnect(&paho.Disconnect{}); err != nil {
		t.Fatal(err)
	}
}

// sqlitePlan is the route consume: topic → the orders table of db. The
// source keeps its checkpoint (that the route has consumed from the
// session) in a state directory beside db, not in the package's own.
func sqlitePlan(url, topic, clientID, db string, batch int) plan.Plan {
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "mqtt", Attrs: map[string]plan.Value{
			"url": plantest.Str(url), "topic": plantest.Str(topic), "client_id": plantest.Str(clientID),
			"checkpoint_store": plantest.Str("pebble://" + filepath.Join(filepath.Dir(db), "state"))}},
		{ID: "n1", Role: plan.RoleSink, Kind: "sql", Attrs: map[string]plan.Value{
			"url":          plantest.Tmpl(plantest.Lit("sqlite://" + db)),
			"create_table": plantest.Str(`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)`),
			"insert_query": plantest.Tmpl(plantest.Lit("INSERT INTO orders (id, amount) VALUES ("), plantest.Ex(`payload.order_id`),
				plantest.Lit(", "), plantest.Ex("payload.amount"), plantest.Lit(") ON CONFLICT (id) DO NOTHING")),
		}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "consume", Guarantee: plan.EffectivelyOnce,
		Concurrency: 1, BatchSize: batch, Nodes: nodes, Edges: plantest.Chain(nodes)}}}
}

// The session is persistent: messages published while no route runs are
// queued by the broker for the route's client id and delivered by the
// next run, and every order lands once.
func TestMQTTSourceToSQLite(t *testing.T) {
	url := testsrv.Mosquitto(t)
	topic, id := "orders/"+t.Name(), "mqb-"+t.Name()
	db := filepath.Join(t.TempDir(), "orders.db")
	p := sqlitePlan(url, topic, id, db, 128)
	c := client(t, url, nil)
	createSession(t, url, id, topic)
	const n = 2000
	publishOrders(t, c, topic, 0, n, true)
	st := runtest.RunUntil(t, p, runtest.Options(), 2*time.Minute, func() bool { return runtest.CountRows(t, db) == n })
	runtest.CheckCounts(t, st.Route("consume"))
	runtest.CheckOrders(t, db, n)
}

// TestCrashMQTTToSQLite: the route SIGKILLed repeatedly: the broker sends
// what a killed run left unacknowledged again when the session resumes,
// and every order lands once.
func TestCrashMQTTToSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("crash tests build and kill a real process") // before the broker and the orders
	}
	url := testsrv.Mosquitto(t)
	topic, id := "orders/"+t.Name(), "mqb-"+t.Name()
	d := t.TempDir()
	db := filepath.Join(d, "orders.db")
	p := sqlitePlan(url, topic, id, db, 32)
	createSession(t, url, id, topic)
	const n = 20000
	// The orders are published while the crash helper builds.
	pub := client(t, url, nil)
	var pubErr error
	published := make(chan struct{})
	go func() { defer close(published); pubErr = publishAll(pub, topic, 0, n, false) }()
	t.Cleanup(func() { <-published }) // before the client goes
	bin := runtest.BuildCrashHelper(t)
	<-published
	if pubErr != nil {
		t.Fatal(pubErr)
	}
	st := runtest.CrashUntil(t, bin, p, d, 59, 8, func() bool { return runtest.CountRows(t, db) == n })
	runtest.CheckCounts(t, st.Route("consume"))
	runtest.CheckOrders(t, db, n)
}

// Bad input (not JSON) goes to the DLQ with the reason.
func TestMQTTBadInputToDLQ(t *testing.T) {
	url := testsrv.Mosquitto(t)
	topic, id := "orders/"+t.Name(), "mqb-"+t.Name()
	d := t.TempDir()
	db, dlq := filepath.Join(d, "orders.db"), filepath.Join(d, "dlq.jsonl")
	p := sqlitePlan(url, topic, id, db, 16)
	nodes := p.Routes[0].Nodes
	p.Routes[0].Nodes = []plan.Node{nodes[0], plantest.DLQFile("d", dlq, ""), nodes[1]}
	p.Routes[0].Edges = plantest.Chain(p.Routes[0].Nodes)
	createSession(t, url, id, topic)
	c := client(t, url, nil)
	publishOrders(t, c, topic, 0, 5, false)
	if _, err := c.Publish(context.Background(), &paho.Publish{QoS: 1, Topic: topic, Payload: []byte("not json")}); err != nil {
		t.Fatal(err)
	}
	st := runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool {
		return runtest.CountRows(t, db) == 5 && len(plantest.ReadDLQLines(t, dlq)) == 1
	})
	if rs := st.Route("consume"); rs.DeadLettered != 1 {
		t.Errorf("stats %+v, want 1 dead-lettered", rs)
	}
}

// file → mqtt: every line is published at QoS 1 with its message_id as
// the user property mq_bridge.message_id.
func TestMQTTSinkFromFile(t *testing.T) {
	url := testsrv.Mosquitto(t)
	topic := "out/" + t.Name()
	msgs := make(chan *paho.Publish, 10000)
	sub := client(t, url, msgs)
	if _, err := sub.Subscribe(context.Background(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	e := plantest.NewEnv(t)
	const n = 2000
	plantest.WriteOrders(t, e.Input, n)
	sink := plan.Node{Kind: "mqtt", Attrs: map[string]plan.Value{"url": plantest.Str(url), "topic": plantest.Str(topic)}}
	rs := runtest.RunRoute(t, context.Background(), plantest.SinkPlan(e.Input, e.State, 128, sink), runtest.Options(), "publish")
	if rs.Out != n {
		t.Fatalf("stats %+v, want out %d", rs, n)
	}
	seen := map[string]bool{}
	for len(seen) < n {
		select {
		case m := <-msgs:
			id := m.Properties.User.Get(runtime.HeaderMessageID)
			if len(id) != 36 || !strings.Contains(string(m.Payload), "order_id") {
				t.Fatalf("message %s with id %q", m.Payload, id)
			}
			seen[string(m.Payload)] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("received %d of %d messages", len(seen), n)
		}
	}
}

// TestMQTTOutage: the broker stops mid-run (gracefully, or killed) and
// starts again two seconds later on the same port and data: the source
// connects again and resumes its session, the route does not stop, and
// every order lands once, those queued before the outage (the broker
// sends again what the lost connection left unacknowledged) and those
// published after it. In the producer_ids case the route is compiled
// from source, effectively-once on the publishers' mq_bridge.message_id
// (the table's key): a message the broker sends again carries the same
// id, so no order lands twice under two ids.
func TestMQTTOutage(t *testing.T) {
	for _, tc := range []struct {
		name        string
		down        testsrv.Down
		producerIDs bool
	}{
		{"stop", testsrv.Downs[0], false},
		{"kill", testsrv.Downs[1], false},
		{"kill_producer_ids", testsrv.Downs[1], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testsrv.SharedMosquitto(t)
			url := srv.URL()
			topic, id := "orders/"+t.Name(), "mqb-"+strings.ReplaceAll(t.Name(), "/", "-")
			d := t.TempDir()
			db := filepath.Join(d, "orders.db")
			p := sqlitePlan(url, topic, id, db, 32)
			if tc.producerIDs {
				p = plantest.Compile(t, fmt.Sprintf(`route consume {
  guarantee effectively_once
  batch_size = 32
  from mqtt { url = %q, topic = %q, client_id = %q, producer_ids = true }
  to sql {
    url          = "sqlite://%s"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, order_id TEXT NOT NULL, amount INTEGER NOT NULL)"
    insert_query = "INSERT INTO orders (id, order_id, amount) VALUES (${message_id}, ${payload.order_id}, ${payload.amount}) ON CONFLICT (id) DO NOTHING"
  }
}
`, url, topic, id, db))
				if g := p.Routes[0].Guarantee; g != plan.EffectivelyOnce {
					t.Fatalf("the compiler says %s, the test expects effectively-once", g)
				}
			}
			opts := runtest.Options()
			opts.StateDir = filepath.Join(d, "state")
			createSession(t, url, id, topic)
			const n = 10000
			publishOrders(t, client(t, url, nil), topic, 0, n, tc.producerIDs)
			// A killed broker keeps what it last saved, and it saves every
			// second (autosave_interval): let it save the queued input.
			time.Sleep(2 * time.Second)
			rs := runtest.Outage{
				Plan: p, Route: "consume", Options: &opts,
				Underway: func() bool { return runtest.CountRows(t, db) > 0 },
				Outage: func() {
					tc.down.Outage(t, srv, 2*time.Second)
					publishOrders(t, client(t, url, nil), topic, n, n, tc.producerIDs) // after the outage too
				},
				Done:   func() bool { return runtest.CountRows(t, db) == 2*n },
				Expect: runtest.RidesThrough,
			}.Run(t)
			t.Logf("%+v", rs)
			if !tc.producerIDs {
				runtest.CheckOrders(t, db, 2*n)
				return
			}
			// SQLiteMap fails on an order_id seen twice: an order that
			// landed under two message ids.
			got := runtest.SQLiteMap[int](t, db, `SELECT order_id, amount FROM orders`)
			for i := range 2 * n {
				if a, ok := got[fmt.Sprintf("o-%d", i)]; !ok || a != i {
					t.Errorf("order o-%d: amount %d, present %v", i, a, ok)
				}
			}
		})
	}
}

// TestMQTTSinkOutage: file → topic while the broker stops and starts
// again two seconds later. With a retry step the sink connects again and
// the route rides through; without one it stops with an error naming the
// sink, and a rerun from the committed position publishes the rest.
// Either way a persistent session subscribed to the topic gets every
// order, some twice (the route is at-least-once). The broker is stopped
// gracefully: Mosquitto acknowledges a QoS 1 message before it is on
// disk (it saves every autosave_interval), so a killed broker loses
// messages it acknowledged, which no publisher can prevent.
func TestMQTTSinkOutage(t *testing.T) {
	for _, tc := range runtest.SinkOutageCases(runtest.Stops) {
		t.Run(tc.Name, func(t *testing.T) {
			srv := testsrv.SharedMosquitto(t)
			url := srv.URL()
			topic, sub := "out/"+t.Name(), "sub-"+strings.ReplaceAll(t.Name(), "/", "-")
			createSession(t, url, sub, topic)
			e := plantest.NewEnv(t)
			const n = 20000
			plantest.WriteOrders(t, e.Input, n)
			sink := plan.Node{Kind: "mqtt", Attrs: map[string]plan.Value{"url": plantest.Str(url), "topic": plantest.Str(topic)}}
			p := plantest.SinkPlan(e.Input, e.State, 128, sink)
			if tc.Retry {
				p = plantest.WithRetryAt(p, len(p.Routes[0].Nodes)-1, 300)
			}
			// A live subscriber sees the route under way.
			var seen atomic.Int64
			watch, err := connect(context.Background(), url, paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){
				func(paho.PublishReceived) (bool, error) { seen.Add(1); return true, nil }}},
				&paho.Connect{ClientID: "watch-" + uuid.NewString(), KeepAlive: 30, CleanStart: true})
			if err != nil {
				t.Fatal(err)
			}
			defer watch.Disconnect(&paho.Disconnect{})
			if _, err := watch.Subscribe(context.Background(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 0}}}); err != nil {
				t.Fatal(err)
			}
			rs := runtest.Outage{
				Plan: p, Route: "publish",
				Underway: func() bool { return seen.Load() > 0 },
				Outage:   func() { srv.Stop(t); time.Sleep(2 * time.Second); srv.Start(t) },
				Expect:   tc.Expect,
				StopSays: []string{"route publish", "mqtt sink"},
			}.Run(t)
			got := drainSession(t, url, sub, n)
			t.Logf("%d orders received; %+v", len(got), rs)
			for i := range n {
				if got[fmt.Sprintf("o-%d", i)] == 0 {
					t.Fatalf("order o-%d was not received (%d of %d were)", i, len(got), n)
				}
			}
		})
	}
}

// drainSession resumes the persistent session of clientID and counts the
// orders the broker queued for it, until it has had each of o-0…o-(n-1)
// or none comes for five seconds.
func drainSession(t testing.TB, url, clientID string, n int) map[string]int {
	t.Helper()
	msgs := make(chan *paho.Publish, 1024)
	cfg := paho.ClientConfig{OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
		msgs <- pr.Packet
		return true, nil
	}}}
	expiry := uint32(3600)
	c, err := connect(context.Background(), url, cfg,
		&paho.Connect{ClientID: clientID, KeepAlive: 30, Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(&paho.Disconnect{})
	got := map[string]int{}
	for {
		select {
		case m := <-msgs:
			var o struct {
				OrderID string `json:"order_id"`
			}
			if err := json.Unmarshal(m.Payload, &o); err != nil {
				t.Fatalf("message %q: %v", m.Payload, err)
			}
			if got[o.OrderID]++; len(got) == n {
				return got
			}
		case <-time.After(5 * time.Second):
			return got
		}
	}
}
