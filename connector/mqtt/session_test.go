package mqtt

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// sessionPlan compiles the route consume: topic → the orders table of db,
// effectively-once on the order id, its mqtt source's attributes extra
// added to url, topic and client_id. It checks that the plan carries the
// session_kept premise (armed on every connection) unless extra turns it
// off.
func sessionPlan(t testing.TB, url, topic, id, db, extra string) plan.Plan {
	t.Helper()
	p := plantest.Compile(t, fmt.Sprintf(`route consume {
  batch_size = 32
  from mqtt { url = %q, topic = %q, client_id = %q%s }
  id payload.order_id
  to sql {
    url          = "sqlite://%s"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)"
    insert_query = "INSERT INTO orders (id, amount) VALUES (${meta[\"mqb.id\"]}, ${payload.amount}) ON CONFLICT (id) DO NOTHING"
  }
}
`, url, topic, id, extra, db))
	r := p.Routes[0]
	found := false
	for _, pr := range r.Premises {
		if pr.Kind == plan.PremiseSessionKept {
			found = pr.When == plan.CheckPerConnection && pr.Node == "n0" && strings.Contains(pr.Holds, id)
		}
	}
	if keeps := !strings.Contains(extra, "resubscribe"); found != keeps {
		t.Fatalf("plan %s, premises %+v: want the session_kept premise %v", r.Guarantee, r.Premises, keeps)
	}
	return p
}

// runBack runs p in the background; the channel gets its error when it
// ends.
func runBack(ctx context.Context, p plan.Plan, opts runtime.Options) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := runtime.Run(ctx, p, opts)
		done <- err
	}()
	return done
}

// runRefused runs p, which must be refused: a run that is not within 30
// seconds is cancelled, and then ends without an error, which fails the
// check.
func runRefused(t *testing.T, p plan.Plan, opts runtime.Options, names []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := runtime.Run(ctx, p, opts)
	plantest.CheckRefused(t, err, names)
}

// sessionLostNames are what the error of a broken session_kept premise
// must name: the premise, the client id and the broker.
func sessionLostNames(url, id string) []string {
	return []string{"session_kept", "client_id " + id, strings.TrimPrefix(url, "mqtt://"), "session present = false", "mqbc state reset", "on_session_lost = resubscribe"}
}

// TestMQTTBrokerLostSessionMidRun: the route consumes from a broker that
// keeps nothing across a restart (persistence false). The broker restarts
// mid-run: the source connects again, finds no session, and the route
// stops with an error naming the premise, the client id and the broker,
// where before it subscribed again and went on, exit 0, though what the
// broker held for it was gone. A rerun is refused at start-up, and so is
// the one after it (the source ended the empty session its connection
// made, rather than leave one a later start would resume quietly); once
// the route's state is reset, the next start is a first start and reads
// what is published after it.
func TestMQTTBrokerLostSessionMidRun(t *testing.T) {
	srv := testsrv.NewMosquittoVolatile(t)
	url := srv.URL()
	topic, id := "orders/"+t.Name(), "mqb-"+t.Name()
	d := t.TempDir()
	db := filepath.Join(d, "orders.db")
	p := sessionPlan(t, url, topic, id, db, "")
	opts := runtest.Options()
	opts.StateDir = filepath.Join(d, "state")

	createSession(t, url, id, topic)
	const n = 200
	publishOrders(t, client(t, url, nil), topic, 0, n, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runBack(ctx, p, opts)
	if !plantest.WaitFor(func() bool { return runtest.CountRows(t, db) == n }, time.Minute, 20*time.Millisecond) {
		t.Fatalf("the route wrote %d of %d orders before the restart", runtest.CountRows(t, db), n)
	}
	srv.Stop(t)
	srv.Start(t)
	select {
	case err := <-done:
		plantest.CheckRefused(t, err, sessionLostNames(url, id))
		if !strings.Contains(err.Error(), "on reconnecting") {
			t.Errorf("err %v, want it to say the session was lost on reconnecting", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the broker lost the route's session, and the route did not stop")
	}

	for i := range 2 {
		runRefused(t, p, opts, append(sessionLostNames(url, id), "at start-up"))
		t.Logf("rerun %d refused", i+1)
	}

	if _, err := runtime.ResetRouteState(context.Background(), p, opts, "consume"); err != nil {
		t.Fatal(err)
	}
	done = runBack(ctx, p, opts)
	probeUntilRead(t, url, topic, db, "p", done)
	publishOrders(t, client(t, url, nil), topic, n, n, false)
	if !plantest.WaitFor(func() bool { return countOrders(t, db) == 2*n }, time.Minute, 20*time.Millisecond) {
		t.Fatalf("after the reset, the table holds %d of %d orders", countOrders(t, db), 2*n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the run after the reset: %v", err)
	}
}

// probeUntilRead publishes probes (order ids prefix-0, prefix-1, …)
// until the route running (done) has written one: it has subscribed.
func probeUntilRead(t *testing.T, url, topic, db, prefix string, done <-chan error) {
	t.Helper()
	pub := client(t, url, nil)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		if runtest.CountRows(t, db) > 0 && len(runtest.SQLiteMap[int](t, db, `SELECT id, amount FROM orders WHERE id LIKE '`+prefix+`-%'`)) > 0 {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the route stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("none of %d probes arrived", i)
		}
		m := &paho.Publish{QoS: 1, Topic: topic, Payload: []byte(fmt.Sprintf(`{"order_id":"%s-%d","amount":%d}`, prefix, i, i))}
		if _, err := pub.Publish(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countOrders counts the orders (o-…) in db.
func countOrders(t testing.TB, db string) int {
	return len(runtest.SQLiteMap[int](t, db, `SELECT id, amount FROM orders WHERE id LIKE 'o-%'`))
}

// TestMQTTBrokerLostSessionWhileStopped: a first start finds no session
// (none was made) and creates it: that is no loss. The route consumes,
// stops cleanly (its checkpoint says it has consumed from the session),
// and the broker restarts without persistence while it is down, losing
// the session and the orders published to it before the restart. The
// next start is refused naming the premise; after the route's state is
// reset it starts as a first start.
func TestMQTTBrokerLostSessionWhileStopped(t *testing.T) {
	srv := testsrv.NewMosquittoVolatile(t)
	url := srv.URL()
	topic, id := "orders/"+t.Name(), "mqb-"+t.Name()
	d := t.TempDir()
	db := filepath.Join(d, "orders.db")
	p := sessionPlan(t, url, topic, id, db, "")
	opts := runtest.Options()
	opts.StateDir = filepath.Join(d, "state")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runBack(ctx, p, opts) // no session, no state: a first start
	probeUntilRead(t, url, topic, db, "p", done)
	const n = 100
	publishOrders(t, client(t, url, nil), topic, 0, n, false)
	if !plantest.WaitFor(func() bool { return countOrders(t, db) == n }, time.Minute, 20*time.Millisecond) {
		t.Fatalf("the route wrote %d of %d orders", countOrders(t, db), n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the first run: %v", err)
	}

	publishOrders(t, client(t, url, nil), topic, n, n, false) // queued for the session, then lost with it
	srv.Stop(t)
	srv.Start(t)
	runRefused(t, p, opts, append(sessionLostNames(url, id), "at start-up"))
	if got := countOrders(t, db); got != n {
		t.Errorf("the refused run wrote: %d orders, want %d", got, n)
	}

	if _, err := runtime.ResetRouteState(context.Background(), p, opts, "consume"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done = runBack(ctx, p, opts)
	probeUntilRead(t, url, topic, db, "q", done)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the run after the reset: %v", err)
	}
}
