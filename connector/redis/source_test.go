package redis

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// TestRedisSourceToSQLite: a stream read by a group into SQLite, each
// order once, with its message_id from the producer's stamp or else
// derived from the entry, its other fields as meta; every entry is
// acknowledged at the end, and a second run reads nothing.
func TestRedisSourceToSQLite(t *testing.T) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	const n = 3000
	stamps := map[string]string{}
	addOrders(t, c, "orders", 0, n, func(i int) string {
		if i%2 == 1 {
			return ""
		}
		id := uuid.NewString()
		stamps[fmt.Sprintf("o-%d", i)] = id
		return id
	})
	db := dbIn(t)
	p := sourcePlan(t, srv.URL(), "orders", "mqb", "", "", toSQLite(db))
	if g := p.Routes[0].Guarantee; g != plan.EffectivelyOnce {
		t.Fatalf("verdict %s, want %s", g, plan.EffectivelyOnce)
	}
	st := runtest.RunUntil(t, p, runtest.Options(), 2*time.Minute, func() bool { return runtest.CountRows(t, db) == n })
	runtest.CheckCounts(t, st.Route("consume"))
	runtest.CheckOrders(t, db, n)
	msgids := runtest.SQLiteMap[string](t, db, `SELECT id, msgid FROM orders`)
	entries := runtest.SQLiteMap[string](t, db, `SELECT id, entry FROM orders`)
	for id, mid := range msgids {
		want := stamps[id]
		if want == "" {
			u, _ := entryMessageID("orders", entries[id], nil)
			want = u.String()
		}
		if mid != want {
			t.Fatalf("%s: message_id %s, want %s", id, mid, want)
		}
	}
	for id, origin := range runtest.SQLiteMap[string](t, db, `SELECT id, origin FROM orders`) {
		if origin != "test" {
			t.Fatalf("%s: meta origin %q, want the entry's field", id, origin)
		}
	}
	if got := pendingCount(t, c, "orders", "mqb"); got != 0 {
		t.Errorf("%d entries left pending after the run", got)
	}
	began := time.Now()
	st = runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return time.Since(began) > time.Second })
	if in := st.Route("consume").In; in != 0 {
		t.Errorf("second run read %d records, want 0", in)
	}
}

// TestRedisAckAfterCommit: entries are acknowledged only past what the
// route committed. A route that stops at a record its sink refuses (and
// has no dlq) leaves that entry and the ones after it pending; the next
// run of the group's consumer reads them again and delivers them, and
// entries a dead consumer of the group read and never acknowledged are
// claimed at start (XAUTOCLAIM) and delivered too: nothing is lost.
func TestRedisAckAfterCommit(t *testing.T) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	ctx := context.Background()
	const n = 400
	addOrders(t, c, "orders", 0, n, nil)
	// Entry n: an order without an amount, which the table refuses.
	badID, err := c.XAdd(ctx, &goredis.XAddArgs{Stream: "orders", Values: []any{"payload", `{"order_id":"o-bad"}`}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	addOrders(t, c, "orders", n, 2*n, nil)
	db := dbIn(t)

	// A consumer that reads 50 entries and dies before acknowledging.
	if err := c.XGroupCreateMkStream(ctx, "orders", "mqb", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "mqb", Consumer: "dead", Streams: []string{"orders", ">"}, Count: 50, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}

	time.Sleep(20 * time.Millisecond) // past claim_idle
	if err := runStop(t, sourcePlan(t, srv.URL(), "orders", "mqb", "claim_idle = 10ms", "", toSQLite(db))); err == nil {
		t.Fatal("the route went past a record its sink refused, with no dlq")
	}
	if got := runtest.CountRows(t, db); got < n {
		t.Fatalf("first run stored %d orders, want the %d before the refused one", got, n)
	}
	pend, err := c.XPendingExt(ctx, &goredis.XPendingExtArgs{Stream: "orders", Group: "mqb", Start: "-", End: "+", Count: 10 * n}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(pend) == 0 || pend[0].ID != badID {
		t.Fatalf("pending after the stop: %d entries from %v, want the refused entry %s first", len(pend), pend[:min(1, len(pend))], badID)
	}
	for _, e := range pend {
		if e.Consumer != "consume" {
			t.Fatalf("entry %s pending with %s: the dead consumer's entries were not claimed", e.ID, e.Consumer)
		}
	}

	dlq := filepath.Join(t.TempDir(), "dlq.jsonl")
	p := sourcePlan(t, srv.URL(), "orders", "mqb", "", dlqBlock(dlq), toSQLite(db))
	runtest.RunUntil(t, p, runtest.Options(), 2*time.Minute, func() bool { return runtest.CountRows(t, db) == 2*n })
	runtest.CheckOrders(t, db, 2*n)
	if lines := plantest.ReadDLQLines(t, dlq); len(lines) != 1 || !strings.Contains(string(lines[0].Payload), "o-bad") {
		t.Errorf("DLQ: %+v, want the order without an amount", lines)
	}
	if got := pendingCount(t, c, "orders", "mqb"); got != 0 {
		t.Errorf("%d entries left pending", got)
	}
}

// runStop runs p until it stops by itself (or a minute passes) and
// returns its error.
func runStop(t *testing.T, p plan.Plan) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := runtime.Run(ctx, p, runtest.Options())
	if ctx.Err() != nil {
		t.Fatal("the route did not stop by itself")
	}
	return err
}

// TestRedisSourceBadInput: an entry without the payload field and one
// whose payload is not JSON go to the DLQ with their reasons; the others
// are delivered and every entry is acknowledged.
func TestRedisSourceBadInput(t *testing.T) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	ctx := context.Background()
	addOrders(t, c, "orders", 0, 100, nil)
	for _, vals := range [][]any{{"body", "no payload field", "k", "v"}, {"payload", `{"order_id": "o-x", "amount": `}} {
		if err := c.XAdd(ctx, &goredis.XAddArgs{Stream: "orders", Values: vals}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	addOrders(t, c, "orders", 100, 200, nil)
	db := dbIn(t)
	dlq := filepath.Join(t.TempDir(), "dlq.jsonl")
	p := sourcePlan(t, srv.URL(), "orders", "mqb", "", dlqBlock(dlq), toSQLite(db))
	st := runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool {
		return runtest.CountRows(t, db) == 200 && len(plantest.ReadDLQLines(t, dlq)) == 2
	})
	rs := st.Route("consume")
	runtest.CheckCounts(t, rs)
	runtest.CheckOrders(t, db, 200)
	lines := plantest.ReadDLQLines(t, dlq)
	if !hasReason(lines, `has no "payload" field (its fields: body, k)`) {
		t.Errorf("DLQ %+v: want the entry without a payload field", lines)
	}
	if len(lines) != 2 || rs.DeadLettered != 2 {
		t.Errorf("DLQ %+v, dead-lettered %d: want 2", lines, rs.DeadLettered)
	}
	if got := pendingCount(t, c, "orders", "mqb"); got != 0 {
		t.Errorf("%d entries left pending", got)
	}
}

// TestRedisServerOutage: the server stops (gracefully, or killed) mid-run
// and comes back on the same port and append-only file; the route waits,
// reads on, and every order lands once.
func TestRedisServerOutage(t *testing.T) {
	for _, down := range testsrv.Downs {
		t.Run(down.Name, func(t *testing.T) { testOutage(t, down.Take) })
	}
}

func testOutage(t *testing.T, stop func(testsrv.Stoppable, testing.TB)) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	const n = 6000
	addOrders(t, c, "orders", 0, n/2, nil)
	db := dbIn(t)
	p := sourcePlan(t, srv.URL(), "orders", "mqb", "block = 100ms", "", toSQLite(db))
	run := runtest.Start(context.Background(), p, runtest.Options())
	if !runtest.WaitFor(func() bool { return runtest.CountRows(t, db) > 0 }, time.Minute, 20*time.Millisecond) {
		run.Stop(t)
		t.Fatal("nothing delivered before the outage")
	}
	stop(srv, t)
	time.Sleep(500 * time.Millisecond)
	srv.Start(t)
	addOrders(t, c, "orders", n/2, n, nil)
	ok := runtest.WaitFor(func() bool { return runtest.CountRows(t, db) == n }, 2*time.Minute, 50*time.Millisecond)
	st := run.Stop(t)
	if !ok {
		t.Fatalf("after the outage the table holds %d of %d orders (%+v)", runtest.CountRows(t, db), n, st.Route("consume"))
	}
	runtest.CheckCounts(t, st.Route("consume"))
	runtest.CheckOrders(t, db, n)
	if got := pendingCount(t, c, "orders", "mqb"); got != 0 {
		t.Errorf("%d entries left pending", got)
	}
}

// TestCrashRedisToSQLite: the route SIGKILLed repeatedly while it reads:
// every order lands once, and at the end nothing is left pending.
func TestCrashRedisToSQLite(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	const n = 60000
	addOrders(t, c, "orders", 0, n, nil)
	d := t.TempDir()
	db := filepath.Join(d, "orders.db")
	p := sourcePlan(t, srv.URL(), "orders", "mqb", "", "", toSQLite(db))
	st := runtest.CrashUntil(t, bin, p, d, 61, 4, func() bool {
		return runtest.CountRows(t, db) == n && pendingCount(t, c, "orders", "mqb") == 0
	})
	rs := st.Route("consume")
	runtest.CheckCounts(t, rs)
	runtest.CheckOrders(t, db, n)
}

func TestEntrySeq(t *testing.T) {
	for _, c := range []struct {
		id   string
		seq  uint64
		fits bool
	}{
		{"0-1", 1, true},
		{"1-0", 1 << seqBits, true},
		{"1764650000000-7", 1764650000000<<seqBits | 7, true},
		{"5-2097151", 5<<seqBits | (1<<seqBits - 1), true},
		{"5-2097152", 0, false},
		{"4398046511104-0", 0, false}, // 2^42 ms
		{"17", 0, false},
		{"a-b", 0, false},
	} {
		seq, ok := entrySeq(c.id)
		if ok != c.fits || (ok && seq != c.seq) {
			t.Errorf("entrySeq(%q) = %d, %v; want %d, %v", c.id, seq, ok, c.seq, c.fits)
		}
	}
	a, _ := entrySeq("1764650000000-9")
	b, _ := entrySeq("1764650000001-0")
	if a >= b {
		t.Errorf("Seq must grow with the id: %d, %d", a, b)
	}
}

func TestEntryMessageID(t *testing.T) {
	id := uuid.MustParse("0190f3a4-5b6c-7d8e-9f00-112233445566")
	for _, c := range []struct {
		name    string
		fields  map[string]any
		stamped bool
		want    uuid.UUID
	}{
		{"stamped UUID", map[string]any{"mq_bridge.message_id": id.String()}, true, id},
		{"stamped text", map[string]any{"mq_bridge.message_id": "order-17"}, true, uuid.NewSHA1(entryIDSpace, []byte("order-17"))},
		{"derived", map[string]any{"payload": "x"}, false, uuid.NewSHA1(entryIDSpace, []byte("s\x001-1"))},
	} {
		got, stamped := entryMessageID("s", "1-1", c.fields)
		if got != c.want || stamped != c.stamped {
			t.Errorf("%s: %s, %v; want %s, %v", c.name, got, stamped, c.want, c.stamped)
		}
	}
}
