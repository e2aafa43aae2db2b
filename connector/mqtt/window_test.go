package mqtt

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// The broker sends the source at most receiveMaximum messages
// unacknowledged: with more queued, the route commits (and so
// acknowledges them) once half are written, not at the next tick of the
// commit interval, here an hour, so the whole queue arrives.
func TestMQTTSourceCommitsWhenReceiveMaximumIsUsedUp(t *testing.T) {
	url := testsrv.Mosquitto(t)
	topic, id := "orders/"+t.Name(), "mqb-"+t.Name()
	db := filepath.Join(t.TempDir(), "orders.db")
	createSession(t, url, id, topic)
	n := int(receiveMaximum) + 1000
	publishOrders(t, client(t, url, nil), topic, 0, n, false)
	opts := runtest.Options()
	opts.CommitInterval = time.Hour
	bg := runtest.Start(context.Background(), sqlitePlan(url, topic, id, db, 256), opts)
	if !plantest.WaitFor(func() bool { return runtest.CountRows(t, db) == n }, time.Minute, 20*time.Millisecond) {
		bg.Stop(t)
		t.Fatalf("%d rows after a minute, want %d", runtest.CountRows(t, db), n)
	}
	st := bg.Stop(t).Route("consume")
	runtest.CheckCounts(t, st)
	if st.In != int64(n) || st.Out != int64(n) {
		t.Errorf("stats %+v, want %d in and out", st, n)
	}
}
