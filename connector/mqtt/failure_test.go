package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// withDLQ puts a dlq step writing to the file dlq right after the source
// of p's route.
func withDLQ(p plan.Plan, dlq string) plan.Plan {
	nodes := p.Routes[0].Nodes
	p.Routes[0].Nodes = append([]plan.Node{nodes[0], plantest.DLQFile("d", dlq, "")}, nodes[1:]...)
	p.Routes[0].Edges = plantest.Chain(p.Routes[0].Nodes)
	return p
}

// amountOf is the amount of an order's payload.
func amountOf(t testing.TB, payload []byte) int {
	t.Helper()
	var o struct {
		Amount int `json:"amount"`
	}
	if err := json.Unmarshal(payload, &o); err != nil {
		t.Fatalf("message %s: %v", payload, err)
	}
	return o.Amount
}

// peekSession resumes clientID's persistent session and collects what the
// broker sends it (until it has n, or nothing comes for 5 s) without
// acknowledging any of it, then disconnects: the session keeps every
// message for the next client to resume it.
func peekSession(t testing.TB, url, clientID string, n int) []*paho.Publish {
	t.Helper()
	msgs := make(chan *paho.Publish, 4096)
	expiry := uint32(3600)
	c, err := connect(context.Background(), url, paho.ClientConfig{
		EnableManualAcknowledgment: true,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			msgs <- pr.Packet
			return true, nil
		}},
	}, &paho.Connect{ClientID: clientID, KeepAlive: 30, Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(&paho.Disconnect{})
	var out []*paho.Publish
	for len(out) < n {
		select {
		case m := <-msgs:
			out = append(out, m)
		case <-time.After(5 * time.Second):
			return out
		}
	}
	return out
}

// A record the route fails to deliver is left for redelivery, never
// acknowledged. The sink refuses order o-113 (a CHECK constraint) and the
// route has no dlq: the run stops with the reason, and the session the
// broker keeps holds o-113 and every order received after it (the source
// acknowledges only the contiguous prefix the route committed). A rerun
// with a dlq gets o-113 again and dead-letters it: nothing was lost.
func TestMQTTFailedRecordIsRedelivered(t *testing.T) {
	const n, bad = 200, 113
	for _, tc := range []struct {
		name  string
		batch int
	}{
		{"batch1", 1},
		{"batch16", 16},
		{"batch64", 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := testsrv.Mosquitto(t)
			topic, id := "orders/"+t.Name(), "mqb-"+strings.ReplaceAll(t.Name(), "/", "-")
			d := t.TempDir()
			db, dlq := filepath.Join(d, "orders.db"), filepath.Join(d, "dlq.jsonl")
			p := sqlitePlan(url, topic, id, db, tc.batch)
			p.Routes[0].Nodes[1].Attrs["create_table"] = plantest.Str(fmt.Sprintf(
				`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL CHECK (amount <> %d))`, bad))
			createSession(t, url, id, topic)
			publishOrders(t, client(t, url, nil), topic, 0, n, false)

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			st, err := runtime.Run(ctx, p, runtest.Options())
			if err == nil || !strings.Contains(err.Error(), "CHECK constraint") || !strings.Contains(err.Error(), "no dlq") {
				t.Fatalf("run ended with %v, want the refused record's reason and that the route has no dlq", err)
			}
			if rs := st.Route("consume"); rs.Errors == 0 || rs.Out >= n {
				t.Errorf("stats %+v: want the refused record counted as an error, not delivered", rs)
			}
			rows := runtest.SQLiteMap[int](t, db, `SELECT id, amount FROM orders`)
			if _, ok := rows[fmt.Sprintf("o-%d", bad)]; ok {
				t.Fatalf("the refused order o-%d is in the table", bad)
			}

			held := map[int]bool{}
			left := peekSession(t, url, id, n)
			for _, m := range left {
				held[amountOf(t, m.Payload)] = true
			}
			for i := bad; i < n; i++ {
				if !held[i] {
					t.Fatalf("o-%d, received at or after the refused record, was acknowledged: the session no longer holds it (it holds %d messages)", i, len(left))
				}
			}
			for i := range n {
				if _, written := rows[fmt.Sprintf("o-%d", i)]; !written && !held[i] {
					t.Errorf("o-%d is neither in the table nor held by the session: lost", i)
				}
			}
			t.Logf("run stopped with %d rows written, %d messages held by the session", len(rows), len(left))

			p = withDLQ(p, dlq)
			runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool {
				return runtest.CountRows(t, db) == n-1 && len(plantest.ReadDLQLines(t, dlq)) >= 1
			})
			lines := plantest.ReadDLQLines(t, dlq)
			if len(lines) != 1 || amountOf(t, lines[0].Payload) != bad || !strings.Contains(lines[0].Error, "CHECK constraint") {
				t.Errorf("dlq %+v, want o-%d with the CHECK constraint's reason", lines, bad)
			}
			if rows := runtest.SQLiteMap[int](t, db, `SELECT id, amount FROM orders`); len(rows) != n-1 {
				t.Errorf("table holds %d orders, want the %d not refused", len(rows), n-1)
			}
		})
	}
}

// aclOrders writes n orders to path, every fifth one (amount%5 == 3)
// bound for the topic the broker's access list forbids; it returns the
// amounts of those.
func aclOrders(t testing.TB, path string, n int) map[int]bool {
	t.Helper()
	denied := map[int]bool{}
	var b strings.Builder
	for i := range n {
		dest := "ok"
		if i%5 == 3 {
			dest, denied[i] = "denied", true
		}
		fmt.Fprintf(&b, `{"order_id":"o-%d","amount":%d,"dest":%q}`+"\n", i, i, dest)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return denied
}

// A publish the broker refuses (a topic its access list does not let the
// client write: MQTT 5 PUBACK with reason 0x87, not authorized) is not
// delivered. With a dlq, each refused record is dead-lettered with the
// broker's reason and the rest are published; without one, the route
// stops on the first refusal, saying why, commits nothing past it, and a
// rerun (with a dlq) resumes there: every record ends up published or
// dead-lettered, and a refused one is never counted as delivered.
func TestMQTTSinkBrokerRefusal(t *testing.T) {
	const n = 100
	srv := testsrv.NewMosquittoACL(t, "topic readwrite acl/ok/#\ntopic read acl/#\n")
	url := srv.URL()
	for _, tc := range []struct {
		name string
		dlq  bool
	}{
		{"with_dlq", true},
		{"without_dlq", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each refusal costs the sink a connection and a wait for
			// the answers on it: the cases run side by side, on topics
			// of their own.
			t.Parallel()
			var mu sync.Mutex
			got := map[int]int{}
			msgs := make(chan *paho.Publish, 4096)
			sub := client(t, url, msgs)
			if _, err := sub.Subscribe(context.Background(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "acl/+/" + tc.name + "/orders", QoS: 1}}}); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			t.Cleanup(func() { close(done) })
			go func() {
				for {
					select {
					case <-done:
						return
					case m := <-msgs:
						var o struct {
							Amount int `json:"amount"`
						}
						_ = json.Unmarshal(m.Payload, &o) // the route publishes the orders as they are
						mu.Lock()
						got[o.Amount]++
						mu.Unlock()
					}
				}
			}()
			e := plantest.NewEnv(t)
			denied := aclOrders(t, e.Input, n)
			sink := plan.Node{Kind: "mqtt", Attrs: map[string]plan.Value{"url": plantest.Str(url),
				"client_id": plantest.Str("mqb-" + uuid.NewString()),
				"topic":     plantest.Tmpl(plantest.Lit("acl/"), plantest.Ex("payload.dest"), plantest.Lit("/"+tc.name+"/orders"))}}
			p := plantest.SinkPlan(e.Input, e.State, 8, sink)
			if tc.dlq {
				p = withDLQ(p, e.DLQ)
				rs := runtest.RunRoute(t, context.Background(), p, runtest.Options(), "publish")
				if rs.Out != int64(n-len(denied)) || rs.DeadLettered != int64(len(denied)) {
					t.Errorf("stats %+v: want out %d, dead-lettered %d", rs, n-len(denied), len(denied))
				}
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				st, err := runtime.Run(ctx, p, runtest.Options())
				if err == nil || !strings.Contains(err.Error(), "refused the publish") || !strings.Contains(err.Error(), "no dlq") {
					t.Fatalf("run ended with %v, want the broker's refusal and that the route has no dlq", err)
				}
				t.Logf("first run: %v", err)
				if rs := st.Route("publish"); rs.Errors == 0 || rs.Out > int64(n-len(denied)) {
					t.Errorf("stats %+v: a refused publish counted as delivered", rs)
				}
				// The rerun, with a dlq, resumes at the refused record.
				runtest.RunRoute(t, context.Background(), withDLQ(p, e.DLQ), runtest.Options(), "publish")
			}
			lines := plantest.ReadDLQLines(t, e.DLQ)
			inDLQ := map[int]bool{}
			for _, l := range lines {
				a := amountOf(t, l.Payload)
				inDLQ[a] = true
				if !denied[a] {
					t.Errorf("o-%d, bound for an allowed topic, was dead-lettered: %s", a, l.Error)
				}
				if !strings.Contains(l.Error, "refused the publish") || !strings.Contains(l.Error, "135") {
					t.Errorf("dlq reason %q does not give the broker's refusal (reason 135, not authorized)", l.Error)
				}
			}
			if len(inDLQ) != len(denied) {
				t.Errorf("%d distinct records dead-lettered, want the %d refused", len(inDLQ), len(denied))
			}
			if !plantest.WaitFor(func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) >= n-len(denied)
			}, 30*time.Second, 20*time.Millisecond) {
				t.Errorf("the subscriber received %d distinct orders, want %d", len(got), n-len(denied))
			}
			mu.Lock()
			defer mu.Unlock()
			for a := range got {
				if denied[a] {
					t.Errorf("o-%d reached a subscriber through a topic the broker forbids", a)
				}
			}
		})
	}
}
