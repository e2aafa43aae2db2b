package mqtt

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime"
)

// droppedNames are what the error of messages dropped from the queues
// must name.
func droppedNames(url, id string) []string {
	return []string{"session_kept", "client_id " + id, strings.TrimPrefix(url, "mqtt://"), droppedTopic, "max_queued_messages", "mqbc state reset", "on_session_lost = resubscribe"}
}

// TestMQTTBrokerDroppedQueuedMessages: Mosquitto as configured by default
// queues 1000 QoS 1 messages for a client and drops the rest, the session
// kept. Here it queues 50. With the route stopped, 200 orders are
// published: before, the next run read the 50 and ended 0 with the
// verdict effectively-once. Now the run stops, naming the count that
// went up and the setting, having read at most what the broker kept; so
// does the run after it. After a reset (a first start, taking the count as it is) the route
// reads what the broker kept, and when the broker drops messages of
// another client's session while the route runs, it stops: the count is
// the broker's, for all clients, and those may have been the route's.
func TestMQTTBrokerDroppedQueuedMessages(t *testing.T) {
	srv := testsrv.NewMosquittoConf(t, "max_queued_messages 50\nsys_interval 1\n")
	url := srv.URL()
	topic, id := "orders/"+t.Name(), "mqb-"+t.Name()
	d := t.TempDir()
	db := filepath.Join(d, "orders.db")
	p := sessionPlan(t, url, topic, id, db, "")
	opts := runtest.Options()
	opts.StateDir = filepath.Join(d, "state")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runBack(ctx, p, opts)
	probeUntilRead(t, url, topic, db, "p", done)
	const n = 40
	publishOrders(t, client(t, url, nil), topic, 0, n, false)
	if !plantest.WaitFor(func() bool { return countOrders(t, db) == n }, time.Minute, 20*time.Millisecond) {
		t.Fatalf("the route wrote %d of %d orders", countOrders(t, db), n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the first run: %v", err)
	}

	publishOrders(t, client(t, url, nil), topic, n, 200, false) // at most 50 queued, the rest dropped
	// The broker publishes its count every sys_interval (1 s here): a
	// start within it reads the old count, and the route stops once the
	// new one comes, having read what the broker kept.
	time.Sleep(1500 * time.Millisecond)
	// The check does not hold the route up: a refused run may read what
	// the broker kept before the count comes; the next one reads nothing.
	runRefused(t, p, opts, append(droppedNames(url, id), "went from 0 to "))
	kept := countOrders(t, db)
	if kept < n || kept > n+50 {
		t.Fatalf("the refused run left %d orders, want %d to %d", kept, n, n+50)
	}
	// It is refused again. What the first left unacknowledged (it may
	// have stopped before writing all the broker kept) comes again, and
	// may be written before the count does: never more than was kept.
	runRefused(t, p, opts, append(droppedNames(url, id), "went from 0 to "))
	if got := countOrders(t, db); got < kept || got > n+50 {
		t.Fatalf("the second refused run left %d orders, want %d to %d", got, kept, n+50)
	}

	if _, err := runtime.ResetRouteState(context.Background(), p, opts, "consume"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done = runBack(ctx, p, opts)
	probeUntilRead(t, url, topic, db, "q", done)
	// Another client's session, away, gets 60 orders: past its queue of
	// 50, some are dropped.
	lazy, err := connect(context.Background(), url, paho.ClientConfig{}, &paho.Connect{ClientID: "lazy-" + id, KeepAlive: 30, CleanStart: true,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(3600))}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lazy.Subscribe(context.Background(), &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	lazy.Disconnect(&paho.Disconnect{ReasonCode: 0})
	publishOrders(t, client(t, url, nil), topic, 1000, 60, false)
	select {
	case err := <-done:
		plantest.CheckRefused(t, err, append(droppedNames(url, id), "went from "))
	case <-time.After(30 * time.Second):
		t.Fatal("the route ran on for 30s after the broker dropped messages")
	}
}

// TestMQTTBrokerHidesDroppedCount: a broker that does not publish its
// count of dropped messages (sys_interval 0) leaves the premise that it
// drops none unchecked: the route is refused at start, saying so; under
// on_session_lost = resubscribe (at-most-once) it reads.
func TestMQTTBrokerHidesDroppedCount(t *testing.T) {
	defer func(d time.Duration) { droppedFirstWait = d }(droppedFirstWait)
	droppedFirstWait = 2 * time.Second
	srv := testsrv.NewMosquittoConf(t, "sys_interval 0\n")
	url := srv.URL()
	topic, id := "orders/"+t.Name(), "mqb-"+t.Name()
	d := t.TempDir()
	db := filepath.Join(d, "orders.db")
	opts := runtest.Options()
	opts.StateDir = filepath.Join(d, "state")
	runRefused(t, sessionPlan(t, url, topic, id, db, ""), opts, []string{droppedTopic, "sys_interval", "on_session_lost = resubscribe", "client_id " + id})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runBack(ctx, sessionPlan(t, url, topic, id, db, `, on_session_lost = resubscribe`), opts)
	probeUntilRead(t, url, topic, db, "p", done)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the run under resubscribe: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }
