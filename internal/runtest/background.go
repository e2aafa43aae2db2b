package runtest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// Background is a run going on while the test acts on its route.
type Background struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the run has ended; st and err are set
	st     runtime.Stats
	err    error
}

// Start runs p in the background under a child of ctx.
func Start(ctx context.Context, p plan.Plan, opts runtime.Options) *Background {
	ctx, cancel := context.WithCancel(ctx)
	r := &Background{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.st, r.err = runtime.Run(ctx, p, opts)
	}()
	return r
}

// Wait waits for the run to end and returns its stats; a failed run fails
// the test.
func (r *Background) Wait(t testing.TB) runtime.Stats {
	t.Helper()
	<-r.done
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	return r.st
}

// Stop cancels the run, which drains and commits, and waits for it.
func (r *Background) Stop(t testing.TB) runtime.Stats {
	t.Helper()
	r.cancel()
	return r.Wait(t)
}

// RunUntil runs p until cond holds (then drains it) or the time is up.
func RunUntil(t *testing.T, p plan.Plan, opts runtime.Options, limit time.Duration, cond func() bool) runtime.Stats {
	t.Helper()
	r := Start(context.Background(), p, opts)
	defer r.cancel()
	deadline := time.After(limit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.done:
			return r.Wait(t)
		case <-deadline:
			r.cancel()
			<-r.done
			t.Fatalf("condition not reached within %v (stats %+v, err %v)", limit, r.st, r.err)
		case <-tick.C:
			if cond() {
				return r.Stop(t)
			}
		}
	}
}

// WaitFor polls done every interval until it holds or timeout has passed,
// and says whether it held.
var WaitFor = plantest.WaitFor

// SQLiteMap reads the (key, value) rows query returns from the SQLite
// database at db, opened read-only, failing on a key seen twice.
func SQLiteMap[V any](t testing.TB, db, query string) map[string]V {
	t.Helper()
	conn, err := sql.Open(plantest.SQLiteDriver, "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	return plantest.ScanPairs[V](t, rows)
}

// CountRows is the number of rows of table orders in the SQLite database
// at db (-1 while the table does not exist).
func CountRows(t testing.TB, db string) int {
	t.Helper()
	conn, err := sql.Open(plantest.SQLiteDriver, "file:"+db+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRow(`SELECT count(*) FROM orders`).Scan(&n); err != nil {
		return -1 // not created yet
	}
	return n
}

// CheckOrders asserts table orders of the SQLite database at db holds
// o-0 … o-(n-1) once each, each with amount its number.
func CheckOrders(t testing.TB, db string, n int) {
	t.Helper()
	seen := SQLiteMap[int](t, db, `SELECT id, amount FROM orders`)
	for id, amount := range seen {
		if id != fmt.Sprintf("o-%d", amount) {
			t.Errorf("row %s has amount %d", id, amount)
		}
	}
	missing := 0
	for i := range n {
		if _, ok := seen[fmt.Sprintf("o-%d", i)]; !ok {
			missing++
		}
	}
	if missing > 0 || len(seen) != n {
		t.Errorf("table holds %d distinct ids, %d of o-0…o-%d missing", len(seen), missing, n-1)
	}
}
