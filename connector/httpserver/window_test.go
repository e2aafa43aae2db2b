package httpserver

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
)

// A client is answered as soon as its record is written: the route
// commits then (the source's ack window is 1), not at the next tick of
// the commit interval, here an hour.
func TestHTTPServerAnswersBeforeTheTick(t *testing.T) {
	d := t.TempDir()
	addr, db := freeAddr(t), filepath.Join(d, "orders.db")
	opts := runtest.Options()
	opts.CommitInterval = time.Hour
	r := runtest.Start(context.Background(), plantest.Compile(t, ordersRoute(addr, db, "", `${payload.order_id}`)), opts)
	waitListening(t, addr)
	c := &http.Client{Timeout: 30 * time.Second}
	const n = 5
	for i := range n {
		if code, body := post(t, c, "http://"+addr+"/orders", order(i)); code != http.StatusNoContent {
			t.Fatalf("POST %d: %d %s", i, code, body)
		}
	}
	if got := runtest.CountRows(t, db); got != n {
		t.Fatalf("the table holds %d rows, want %d", got, n)
	}
	st := r.Stop(t).Route("ingest")
	if st.Committed != n {
		t.Errorf("stats %+v, want %d committed", st, n)
	}
}
