package mqtt

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// logBuffer collects a run's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// wipeSession takes clientID's session over with a clean start and ends
// it (no session expiry): the broker drops the session, its subscription
// and what it queued, and disconnects the client that had it.
func wipeSession(t testing.TB, url, clientID string) {
	t.Helper()
	c, err := connect(context.Background(), url, paho.ClientConfig{}, &paho.Connect{ClientID: clientID, KeepAlive: 30, CleanStart: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Disconnect(&paho.Disconnect{}); err != nil {
		t.Fatal(err)
	}
}

// TestMQTTSessionLost: while the route runs, its session is wiped (a
// takeover with its client id and a clean start). The source connects
// again and finds no session (session present = false): what the broker
// held for the route is gone, the plan's premise session_kept is broken,
// and the route stops with an error naming it, the client id and the
// broker. (The plan here is built by hand, without the premise: the
// source checks it whenever it keeps a session.)
func TestMQTTSessionLost(t *testing.T) {
	url := testsrv.Mosquitto(t)
	topic, id := "orders/"+t.Name(), "mqb-"+t.Name()
	d := t.TempDir()
	db := filepath.Join(d, "orders.db")
	createSession(t, url, id, topic)
	const n = 500
	publishOrders(t, client(t, url, nil), topic, 0, n, false)
	opts := runtest.Options()
	opts.StateDir = filepath.Join(d, "state")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runBack(ctx, sqlitePlan(url, topic, id, db, 32), opts)
	if !plantest.WaitFor(func() bool { return runtest.CountRows(t, db) == n }, time.Minute, 20*time.Millisecond) {
		t.Fatalf("the route wrote %d of %d orders before the session was wiped", runtest.CountRows(t, db), n)
	}
	wipeSession(t, url, id)
	select {
	case err := <-done:
		plantest.CheckRefused(t, err, append(sessionLostNames(url, id), "on reconnecting"))
	case <-time.After(time.Minute):
		t.Fatal("the session was wiped, and the route did not stop")
	}
}

// TestMQTTSessionLostResubscribe: under on_session_lost = resubscribe
// (at-most-once, as the compiler says) the same wipe does not stop the
// route: the source says so in a warning and subscribes again, and the
// orders published after it subscribed again land, once each. Messages
// published between the wipe and the new subscription go to no one (the
// warning says so): the test publishes probes until one arrives, then the
// orders.
func TestMQTTSessionLostResubscribe(t *testing.T) {
	url := testsrv.Mosquitto(t)
	topic, id := "orders/"+t.Name(), "mqb-"+t.Name()
	db := filepath.Join(t.TempDir(), "orders.db")
	createSession(t, url, id, topic)
	pub := client(t, url, nil)
	const n = 500
	publishOrders(t, pub, topic, 0, n, false)

	var logs logBuffer
	opts := runtest.Options()
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := sqlitePlan(url, topic, id, db, 32)
	p.Routes[0].Guarantee = plan.AtMostOnce
	p.Routes[0].Nodes[0].Attrs["on_session_lost"] = plantest.Enum("resubscribe")
	r := runtest.Start(context.Background(), p, opts)
	if !plantest.WaitFor(func() bool { return runtest.CountRows(t, db) == n }, time.Minute, 20*time.Millisecond) {
		r.Stop(t)
		t.Fatalf("the route wrote %d of %d orders before the session was wiped", runtest.CountRows(t, db), n)
	}
	wipeSession(t, url, id)

	probes := 0
	probed := func() bool {
		return len(runtest.SQLiteMap[int](t, db, `SELECT id, amount FROM orders WHERE id LIKE 'p-%'`)) > 0
	}
	deadline := time.Now().Add(30 * time.Second)
	for !probed() {
		if time.Now().After(deadline) {
			r.Stop(t)
			t.Fatalf("none of %d probes published after the session was wiped arrived: the source did not subscribe again (log:\n%s)", probes, logs.String())
		}
		m := &paho.Publish{QoS: 1, Topic: topic, Payload: []byte(fmt.Sprintf(`{"order_id":"p-%d","amount":%d}`, probes, probes))}
		if _, err := pub.Publish(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		probes++
		time.Sleep(100 * time.Millisecond)
	}
	publishOrders(t, pub, topic, n, n, false)
	orders := func() map[string]int {
		return runtest.SQLiteMap[int](t, db, `SELECT id, amount FROM orders WHERE id LIKE 'o-%'`)
	}
	if !plantest.WaitFor(func() bool { return len(orders()) == 2*n }, time.Minute, 20*time.Millisecond) {
		r.Stop(t)
		t.Fatalf("the table holds %d of the %d orders", len(orders()), 2*n)
	}
	rs := r.Stop(t).Route("consume") // fails the test if the route stopped by itself
	runtest.CheckCounts(t, rs)
	got := orders()
	for i := range 2 * n {
		if a, ok := got[fmt.Sprintf("o-%d", i)]; !ok || a != i {
			t.Errorf("order o-%d: amount %d, present %v", i, a, ok)
		}
	}
	log := logs.String()
	for _, want := range []string{"no longer has the session", "subscribing again (on_session_lost = resubscribe)", "may be lost"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
	t.Logf("%d probes; %+v; warnings:\n%s", probes, rs, log)
}

// TestMQTTAcksOfALostConnectionDropped drives the source by itself: it
// reads ten orders and does not commit them; the session is wiped, the
// source (under on_session_lost = resubscribe: otherwise it would stop)
// connects again to a new session and reads ten more, which the
// broker numbers with the same packet ids. The route then commits the
// first ten only: their PUBACKs are owed on the lost connection and are
// dropped. Sent on the new one they would acknowledge the ten new orders,
// which nothing committed, and a crash would lose them: the session must
// still hold all ten once the source is closed.
func TestMQTTAcksOfALostConnectionDropped(t *testing.T) {
	url := testsrv.Mosquitto(t)
	topic, id := "orders/"+t.Name(), "mqb-"+t.Name()
	const n = 10
	var logs logBuffer
	s := &source{route: "consume", log: slog.New(slog.NewTextHandler(&logs, nil)), url: url, topic: topic, clientID: id,
		qos: 1, expiry: time.Hour, format: "json", resubscribe: true, msgs: make(chan delivery, 4096), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Open(ctx, checkpoint.Position{}, false, nil); err != nil {
		t.Fatal(err)
	}
	recs := make(chan runtime.Record, 4096)
	read := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			b, _, err := s.Next(ctx, 64)
			if err != nil {
				read <- err
				return
			}
			for _, r := range b.Records() {
				recs <- r
			}
		}
		read <- nil
	}()
	take := func(k int) []runtime.Record {
		var out []runtime.Record
		for len(out) < k {
			select {
			case r := <-recs:
				out = append(out, r)
			case err := <-read:
				t.Fatalf("Next: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatalf("read %d of %d messages", len(out), k)
			}
		}
		return out
	}
	pub := client(t, url, nil)
	publishOrders(t, pub, topic, 0, n, false)
	first := take(n)
	wipeSession(t, url, id)
	if !plantest.WaitFor(func() bool { return s.current().gen > 1 }, 30*time.Second, 10*time.Millisecond) {
		t.Fatalf("the source did not connect again (log:\n%s)", logs.String())
	}
	publishOrders(t, pub, topic, n, n, false)
	second := take(n)
	if first[n-1].Seq != n-1 || second[0].Seq != n {
		t.Fatalf("Seqs %d… and %d…, want 0… and %d…", first[0].Seq, second[0].Seq, n)
	}
	if err := s.Commit(ctx, map[int32]runtime.AckPos{0: {Next: n}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the client sends PUBACKs every 50 ms
	cancel()
	<-read
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	held := map[int]bool{}
	for _, m := range peekSession(t, url, id, 2*n) {
		held[amountOf(t, m.Payload)] = true
	}
	for i := n; i < 2*n; i++ {
		if !held[i] {
			t.Errorf("o-%d, read on the new connection and not committed, was acknowledged: the session holds %d messages", i, len(held))
		}
	}
}

// TestMQTTQoS0Reconnects: a QoS 0 source (a clean session under a client
// id of its own, at-most-once) rides through a broker restart too: the
// new session has no subscription, so it subscribes again, and what is
// published after that arrives. What was published while it was away is
// lost, as the verdict says; the test publishes probes until one arrives.
func TestMQTTQoS0Reconnects(t *testing.T) {
	srv := testsrv.SharedMosquitto(t)
	url := srv.URL()
	topic := "orders/" + t.Name()
	db := filepath.Join(t.TempDir(), "orders.db")
	p := sqlitePlan(url, topic, "", db, 32)
	p.Routes[0].Guarantee = plan.AtMostOnce
	delete(p.Routes[0].Nodes[0].Attrs, "client_id")
	p.Routes[0].Nodes[0].Attrs["qos"] = plantest.Int(0)
	r := runtest.Start(context.Background(), p, runtest.Options())
	pub := client(t, url, nil)
	probes := 0
	// probe publishes probes until the table holds more than had.
	probe := func(had int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for runtest.CountRows(t, db) <= had {
			if time.Now().After(deadline) {
				r.Stop(t)
				t.Fatalf("none of the probes published arrived (%d rows)", runtest.CountRows(t, db))
			}
			m := &paho.Publish{QoS: 1, Topic: topic, Payload: []byte(fmt.Sprintf(`{"order_id":"p-%d","amount":%d}`, probes, probes))}
			if _, err := pub.Publish(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			probes++
			time.Sleep(100 * time.Millisecond)
		}
	}
	probe(0)
	srv.Stop(t)
	time.Sleep(time.Second)
	srv.Start(t)
	pub = client(t, url, nil)
	probe(runtest.CountRows(t, db))
	const n = 500
	publishOrders(t, pub, topic, 0, n, false)
	orders := func() int {
		return len(runtest.SQLiteMap[int](t, db, `SELECT id, amount FROM orders WHERE id LIKE 'o-%'`))
	}
	if !plantest.WaitFor(func() bool { return orders() == n }, time.Minute, 20*time.Millisecond) {
		r.Stop(t)
		t.Fatalf("the table holds %d of the %d orders published after the restart", orders(), n)
	}
	rs := r.Stop(t).Route("consume") // fails the test if the route stopped by itself
	t.Logf("%d probes; %+v", probes, rs)
}
