package sql

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// TestSQLCursorSourceRowsBehindCursor: a row inserted with a cursor value
// below one the source has read would never be read. The source counts
// the rows at or below its cursor when it resumes and whenever it has
// caught up, and stops the route, naming them, when there are more than
// it has read: rows inserted behind it while the route was down stop the
// next start before anything is read, and one inserted while it runs
// stops it. Deleting rows (behind the cursor or not) stops nothing.
func TestSQLCursorSourceRowsBehindCursor(t *testing.T) {
	for i, newDB := range cursorDBs() {
		t.Run([]string{"postgres", "mariadb"}[i], func(t *testing.T) {
			db := newDB(t)
			db.exec(db.srcDDL)
			db.exec(db.sinkDDL)
			db.exec(`INSERT INTO src (id, amount, body) VALUES (10, 1, 'a'), (20, 2, 'b'), (30, 3, 'c')`)
			e := newTestEnv(t)
			p := cursorPlan(e, db, map[string]plan.Value{"table": strV("src"), "cursor_column": strV("id")})
			p.Routes[0].Premises = []plan.Premise{{Kind: plan.PremiseIncreasingID, When: plan.CheckPerRecord, Node: "n0",
				Target: "src.id", Holds: "rows reach src with increasing ids", Reason: "source: paged by id"}}
			runCursorUntil(t, p, func() bool { return db.count("copy") == 3 })

			// While the route is down: 25 lands behind its cursor (30), 40
			// ahead of it. The next start is refused before it reads 40.
			db.exec(`INSERT INTO src (id, amount, body) VALUES (25, 4, 'behind'), (40, 5, 'ahead')`)
			err := runFor(t, p, 20*time.Second)
			wantBehind(t, err, "1 row(s)", "at or below 30")
			if n := db.count("copy"); n != 3 {
				t.Errorf("%d rows copied after the refused start, want 3", n)
			}

			// The row deleted (and one read before), the route starts and
			// copies 40.
			db.exec(`DELETE FROM src WHERE id IN (25, 10)`)
			runCursorUntil(t, p, func() bool { return db.count("copy") == 4 })

			// While it runs: 35 lands behind its cursor (40) and stops it.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := runtime.Run(ctx, p, testOptions(t))
				done <- err
			}()
			time.Sleep(500 * time.Millisecond) // caught up: it polls
			db.exec(`INSERT INTO src (id, amount, body) VALUES (35, 6, 'behind while running')`)
			select {
			case err := <-done:
				wantBehind(t, err, "1 row(s)", "at or below 40")
			case <-ctx.Done():
				t.Fatal("the route ran on for 30s past a row inserted behind its cursor")
			}
			if n := db.count("copy"); n != 4 {
				t.Errorf("%d rows copied, want 4", n)
			}
		})
	}
}

// runFor runs p until it ends or d has passed, and returns its error.
func runFor(t *testing.T, p plan.Plan, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := runtime.Run(ctx, p, testOptions(t))
	if ctx.Err() != nil {
		t.Fatalf("the route ran for %v without stopping (err %v)", d, err)
	}
	return err
}

func wantBehind(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("the route ended without an error")
	}
	for _, w := range append(want, "route cursor", "would never be read", "cursor_column id", "premise increasing_id is broken (source: paged by id)") {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}
