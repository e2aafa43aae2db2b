package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime"
)

// TestRedisSourceEntriesTrimmedBeforeRead: a route read orders 0–99 and
// stopped; 100 more came, and the stream was trimmed to its last 50
// (XTRIM MAXLEN) before the route ran again, so orders 100–149 were
// never delivered to the group. XREADGROUP would deliver 150 next as if
// they had never been; the route stops instead, naming the 50 entries
// and how to go on, and reads nothing past them, at every rerun and for
// every consumer of the group. Once the loss is accepted as the error
// says (XGROUP SETID … ENTRIESREAD), the route reads 150–199.
func TestRedisSourceEntriesTrimmedBeforeRead(t *testing.T) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	ctx := context.Background()
	addOrders(t, c, "orders", 0, 100, nil)
	db := dbIn(t)
	p := sourcePlan(t, srv.URL(), "orders", "mqb", "", "", toSQLite(db))
	runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 100 })
	lastRead := entryIDs(t, c, "orders")[99]

	addOrders(t, c, "orders", 100, 200, nil)
	if err := c.XTrimMaxLen(ctx, "orders", 50).Err(); err != nil {
		t.Fatal(err)
	}
	accept := fmt.Sprintf("XGROUP SETID orders mqb %s ENTRIESREAD 150", lastRead)
	for _, consumer := range []string{"", `consumer = "other"`, ""} {
		err := runStop(t, sourcePlan(t, srv.URL(), "orders", "mqb", consumer, "", toSQLite(db)))
		if err == nil {
			t.Fatal("the route ran on past entries trimmed before it read them")
		}
		for _, want := range []string{"stream orders group mqb", "50 entries were trimmed", "after the group's last delivered entry " + lastRead, accept} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if n := runtest.CountRows(t, db); n != 100 {
			t.Fatalf("%d rows, want the 100 of the first run (nothing read past the trimmed entries)", n)
		}
	}

	// The loss accepted as the error says: the route reads on.
	args := strings.Fields(accept)
	cmd := make([]any, len(args))
	for i, a := range args {
		cmd[i] = a
	}
	if err := c.Do(ctx, cmd...).Err(); err != nil {
		t.Fatal(err)
	}
	runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 150 })
	for id, amount := range runtest.SQLiteMap[int](t, db, `SELECT id, amount FROM orders`) {
		if amount >= 100 && amount < 150 {
			t.Errorf("order %s was read, but it was trimmed", id)
		}
	}
}

// TestRedisSourceTrimWhileRunning: the stream is trimmed while the route
// runs, in one transaction with the entries it removes, so the route
// cannot have read them in between: it stops, naming them.
func TestRedisSourceTrimWhileRunning(t *testing.T) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	ctx := context.Background()
	addOrders(t, c, "orders", 0, 10, nil)
	db := dbIn(t)
	p := sourcePlan(t, srv.URL(), "orders", "mqb", "block = 100ms", "", toSQLite(db))
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := runtime.Run(rctx, p, runtest.Options())
		done <- err
	}()
	if !runtest.WaitFor(func() bool { return runtest.CountRows(t, db) == 10 }, time.Minute, 20*time.Millisecond) {
		t.Fatal("the first 10 orders were not read")
	}
	_, err := c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		for i := 10; i < 40; i++ {
			pipe.XAdd(ctx, &goredis.XAddArgs{Stream: "orders", Values: []any{"payload", fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, i, i), "origin", "test"}})
		}
		pipe.XTrimMaxLen(ctx, "orders", 5)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "25 entries were trimmed") {
			t.Fatalf("the route ended with %v, want the 25 entries trimmed before it read them", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the route ran on past the trimmed entries (%d rows)", runtest.CountRows(t, db))
	}
	if n := runtest.CountRows(t, db); n != 10 {
		t.Errorf("%d rows, want 10", n)
	}
}

// TestRedisSourceTrimOfReadEntries: trims that remove only entries the
// group was delivered (and acknowledged) do not stop the route, exact
// or approximate, by MAXLEN or MINID, nor does an empty stream.
func TestRedisSourceTrimOfReadEntries(t *testing.T) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	ctx := context.Background()
	db := dbIn(t)
	p := sourcePlan(t, srv.URL(), "orders", "mqb", "", "", toSQLite(db))
	addOrders(t, c, "orders", 0, 1000, nil)
	runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 1000 })

	// Everything read: the stream emptied, then filled again.
	if err := c.XTrimMaxLen(ctx, "orders", 0).Err(); err != nil {
		t.Fatal(err)
	}
	addOrders(t, c, "orders", 1000, 2000, nil)
	// Only entries read before: up to the first new one.
	first := entryIDs(t, c, "orders")[0]
	addOrders(t, c, "orders", 2000, 3000, nil)
	if err := c.XTrimMinIDApprox(ctx, "orders", first, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.XTrimMinID(ctx, "orders", first).Err(); err != nil {
		t.Fatal(err)
	}
	logs := &runtest.Logs{}
	runtest.RunUntil(t, p, logs.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 3000 })
	runtest.CheckOrders(t, db, 3000)
	noLog(t, logs, "trimmed")

	// While the route runs: it keeps up, and the trims behind it remove
	// only what it read.
	run := runtest.Start(ctx, sourcePlan(t, srv.URL(), "orders", "mqb", "block = 50ms", "", toSQLite(db)), logs.Options())
	for lo := 3000; lo < 5000; lo += 100 {
		addOrders(t, c, "orders", lo, lo+100, nil)
		if !runtest.WaitFor(func() bool { return runtest.CountRows(t, db) == lo+100 }, time.Minute, 5*time.Millisecond) {
			run.Stop(t)
			t.Fatalf("orders up to %d not read", lo+100)
		}
		if err := c.XTrimMaxLen(ctx, "orders", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	run.Stop(t)
	runtest.CheckOrders(t, db, 5000)
	noLog(t, logs, "trimmed")
}

// TestRedisSourceGroupOnTrimmedStream: a group made at the beginning of a
// stream trimmed before it existed has lost nothing: the route reads what
// the stream holds and goes on, whether the route made the group (with
// its entries-read counter set) or someone else did without one.
func TestRedisSourceGroupOnTrimmedStream(t *testing.T) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	ctx := context.Background()
	addOrders(t, c, "orders", 0, 500, nil)
	if err := c.XTrimMaxLen(ctx, "orders", 100).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.XGroupCreate(ctx, "orders", "other", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for _, group := range []string{"mqb", "other"} {
		db := dbIn(t)
		logs := &runtest.Logs{}
		st := runtest.RunUntil(t, sourcePlan(t, srv.URL(), "orders", group, "", "", toSQLite(db)), logs.Options(), time.Minute,
			func() bool { return runtest.CountRows(t, db) == 100 })
		if in := st.Route("consume").In; in != 100 {
			t.Errorf("group %s: read %d, want the 100 the stream holds", group, in)
		}
		noLog(t, logs, "trimmed")
	}
}

// TestRedisSourceDeletedEntries: an entry the producer deletes (XDEL)
// before the group read it is not a loss: the route reads the others and
// goes on. When such a stream is also trimmed past entries the group had
// not been delivered, the server's counters cannot tell a trimmed entry
// from a deleted one: the route warns and reads on.
func TestRedisSourceDeletedEntries(t *testing.T) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	ctx := context.Background()
	db := dbIn(t)
	p := sourcePlan(t, srv.URL(), "orders", "mqb", "", "", toSQLite(db))
	addOrders(t, c, "orders", 0, 100, nil)
	runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 100 })

	addOrders(t, c, "orders", 100, 200, nil)
	ids := entryIDs(t, c, "orders")
	if err := c.XDel(ctx, "orders", ids[100], ids[150]).Err(); err != nil {
		t.Fatal(err)
	}
	logs := &runtest.Logs{}
	runtest.RunUntil(t, p, logs.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 198 })
	noLog(t, logs, "trimmed")

	// Deleted and trimmed past unread entries: a WARN, and the route
	// reads what is left.
	addOrders(t, c, "orders", 200, 300, nil)
	ids = entryIDs(t, c, "orders")
	if err := c.XDel(ctx, "orders", ids[len(ids)-50]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.XTrimMaxLen(ctx, "orders", 20).Err(); err != nil {
		t.Fatal(err)
	}
	runtest.RunUntil(t, p, logs.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 218 })
	if !strings.Contains(logs.String(), "up to 80 entries the group had not been delivered may have been trimmed") {
		t.Errorf("no WARN of the entries that may have been trimmed; logs:\n%s", logs)
	}
}

// entryIDs is the ids of the entries stream holds, in order.
func entryIDs(t testing.TB, c *goredis.Client, stream string) []string {
	t.Helper()
	msgs, err := c.XRange(context.Background(), stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// noLog fails the test when a log line says s.
func noLog(t testing.TB, logs *runtest.Logs, s string) {
	t.Helper()
	if strings.Contains(logs.String(), s) {
		t.Errorf("the logs say %q:\n%s", s, logs)
	}
}
