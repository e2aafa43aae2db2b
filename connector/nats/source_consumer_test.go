package nats

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime"
)

// TestNATSSourceConsumerDeleted: the route's durable consumer deleted
// while the route runs (nats consumer rm) ends its deliveries for good:
// the client library stops pulling and says so only to an error
// handler. The route stops with an error naming the consumer, instead of
// standing still with its messages unread and exiting 0 when stopped.
func TestNATSSourceConsumerDeleted(t *testing.T) {
	url := testsrv.NATS(t)
	_, js := jetStreamOf(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.new"}}); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "orders.db")
	p := natsSQLitePlan(url, db, 64, 1, 30*time.Second)
	publishRange(t, js, 0, 10)
	done := make(chan error, 1)
	rctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	go func() {
		_, err := runtime.Run(rctx, p, runtest.Options())
		done <- err
	}()
	if !runtest.WaitFor(func() bool { return runtest.CountRows(t, db) == 10 }, 30*time.Second, 20*time.Millisecond) {
		t.Fatalf("%d rows, want 10", runtest.CountRows(t, db))
	}
	if err := js.DeleteConsumer(ctx, "ORDERS", "mqb-orders"); err != nil {
		t.Fatal(err)
	}
	publishRange(t, js, 10, 20)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the route ended without an error")
		}
		for _, want := range []string{"durable mqb-orders", "deleted"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the route still runs 30 s after its consumer was deleted, %d rows", runtest.CountRows(t, db))
	}
}
