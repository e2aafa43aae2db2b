package amqp

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// With a prefetch smaller than the queue, the broker hands the route no
// more once that many wait unacked: the route commits (and acks) as soon
// as half of them are written, not at the next tick of the commit
// interval, here an hour, so the whole queue arrives.
func TestSourceCommitsWhenPrefetchIsUsedUp(t *testing.T) {
	url := testsrv.RabbitMQ(t)
	q := queueName(t)
	declareQueue(t, url, q)
	const n = 40
	publishOrders(t, url, q, 0, n, false)
	db := filepath.Join(t.TempDir(), "orders.db")
	opts := runtest.Options()
	opts.CommitInterval = time.Hour
	bg := runtest.Start(context.Background(), sqlitePlan(url, q, db, 16, 4, false), opts)
	if !runtest.WaitFor(func() bool { return runtest.CountRows(t, db) == n }, time.Minute, 20*time.Millisecond) {
		bg.Stop(t)
		t.Fatalf("%d rows after a minute, want %d", runtest.CountRows(t, db), n)
	}
	st := bg.Stop(t).Route("consume")
	runtest.CheckCounts(t, st)
	if st.In != n || st.Out != n {
		t.Errorf("stats %+v, want %d in and out", st, n)
	}
}
