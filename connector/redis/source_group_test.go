package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestRedisGroupGoneStartsAtBeginning: group_start = end applies to the
// route's first start only. A group gone after the route read through it
// (XGROUP DESTROY here; a stream deleted and written anew does the same),
// found gone while the route runs or at its next start, is made again at
// the stream's start: made at its end, it would pass over the entries
// added while it was gone.
func TestRedisGroupGoneStartsAtBeginning(t *testing.T) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	db := dbIn(t)
	opts := runtest.Options()
	opts.StateDir = t.TempDir()
	p := sourcePlan(t, srv.URL(), "orders", "mqb", `group_start = end`, "", toSQLite(db))
	addOrders(t, c, "orders", 0, 10, nil) // before the route: not its to read
	have := func(from, to int) bool {
		rows := runtest.SQLiteMap[int](t, db, `SELECT id, amount FROM orders`)
		for i := from; i < to; i++ {
			if _, ok := rows[fmt.Sprintf("o-%d", i)]; !ok {
				return false
			}
		}
		return true
	}
	destroy := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.XGroupDestroy(ctx, "orders", "mqb").Err(); err != nil {
			t.Fatal(err)
		}
	}
	groupThere := func() bool {
		gs, err := c.XInfoGroups(context.Background(), "orders").Result()
		return err == nil && len(gs) == 1
	}

	r := runtest.Start(context.Background(), p, opts)
	if !runtest.WaitFor(groupThere, 30*time.Second, 20*time.Millisecond) {
		r.Stop(t)
		t.Fatal("the route did not make its group")
	}
	addOrders(t, c, "orders", 10, 20, nil)
	if !runtest.WaitFor(func() bool { return runtest.CountRows(t, db) == 10 && have(10, 20) }, 30*time.Second, 20*time.Millisecond) {
		r.Stop(t)
		t.Fatalf("%d rows, want orders 10–19 only", runtest.CountRows(t, db))
	}
	destroy()
	addOrders(t, c, "orders", 20, 30, nil)
	ok := runtest.WaitFor(func() bool { return have(20, 30) }, 30*time.Second, 20*time.Millisecond)
	r.Stop(t)
	if !ok {
		t.Fatalf("orders 20–29, added while the group was gone, were not read by the running route (%d rows)", runtest.CountRows(t, db))
	}

	destroy()
	addOrders(t, c, "orders", 30, 40, nil)
	runtest.RunUntil(t, p, opts, time.Minute, func() bool { return have(30, 40) })
	if got := pendingCount(t, c, "orders", "mqb"); got != 0 {
		t.Errorf("%d entries left pending", got)
	}
}
