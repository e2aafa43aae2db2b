package redis

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

// sinkPlan compiles a route "publish" from the JSON lines of input into
// the stream of the server at url, with the sink's extra attributes.
func sinkPlan(t testing.TB, input, url, stream, attrs string) plan.Plan {
	t.Helper()
	return plantest.Compile(t, fmt.Sprintf(`route publish {
  batch_size = 128
  from file { path = %q }
  id payload.order_id
  map {
    meta["region"] = "eu"
    meta["origin"] = "test"
  }
  to redis {
    url    = %q
    stream = %q
    %s
  }
}
`, input, url, stream, attrs))
}

// readStream reads every entry of stream.
func readStream(t testing.TB, c *goredis.Client, stream string) []goredis.XMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, err := c.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// TestRedisSinkFileToRedis: every line of a file becomes one entry,
// carrying the payload, mq_bridge.message_id (a UUID) and the forwarded
// meta; the compiler calls the route at-least-once (a stream cannot
// absorb a replay).
func TestRedisSinkFileToRedis(t *testing.T) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	e := plantest.NewEnv(t)
	const n = 2000
	lines := plantest.WriteOrders(t, e.Input, n)
	p := sinkPlan(t, e.Input, srv.URL(), "orders.${payload.amount % 2}", "")
	if g := p.Routes[0].Guarantee; g != plan.AtLeastOnce {
		t.Fatalf("verdict %s, want %s", g, plan.AtLeastOnce)
	}
	rs := runtest.RunIn(t, e.Dir, p).Route("publish")
	if rs.Out != n {
		t.Fatalf("stats %+v, want out %d", rs, n)
	}
	want := map[string]bool{}
	for _, l := range lines {
		want[l] = true
	}
	ids := map[string]bool{}
	for _, stream := range []string{"orders.0", "orders.1"} {
		msgs := readStream(t, c, stream)
		if len(msgs) != n/2 {
			t.Errorf("%s holds %d entries, want %d", stream, len(msgs), n/2)
		}
		for _, m := range msgs {
			payload, _ := m.Values["payload"].(string)
			if !want[payload] {
				t.Fatalf("%s entry %s: payload %q is not an input line (or is there twice)", stream, m.ID, payload)
			}
			delete(want, payload)
			id, _ := m.Values["mq_bridge.message_id"].(string)
			if _, err := uuid.Parse(id); err != nil || ids[id] {
				t.Fatalf("entry %s: mq_bridge.message_id %q: want a UUID of its own", m.ID, id)
			}
			ids[id] = true
			if m.Values["region"] != "eu" || m.Values["mqb.id"] == nil {
				t.Fatalf("entry %s: fields %v, want the forwarded meta", m.ID, m.Values)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("%d lines missing from the streams", len(want))
	}
}

// TestRedisSinkMaxLen: max_len trims the stream to about that many
// entries as it appends.
func TestRedisSinkMaxLen(t *testing.T) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	e := plantest.NewEnv(t)
	plantest.WriteOrders(t, e.Input, 5000)
	runtest.RunIn(t, e.Dir, sinkPlan(t, e.Input, srv.URL(), "orders", "max_len = 1000"))
	n, err := c.XLen(context.Background(), "orders").Result()
	if err != nil {
		t.Fatal(err)
	}
	// MAXLEN ~ trims whole nodes of the stream: a little over, never under.
	if n < 1000 || n > 1500 {
		t.Errorf("stream holds %d entries, want about 1000", n)
	}
}

// TestRedisSinkRefusesWrongType: a record whose stream key holds another
// type is refused and dead-lettered with the server's reason; the others
// are written.
func TestRedisSinkRefusesWrongType(t *testing.T) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	if err := c.Set(context.Background(), "orders.1", "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	e := plantest.NewEnv(t)
	plantest.WriteOrders(t, e.Input, 100)
	src := fmt.Sprintf(`route publish {
  from file { path = %q }
  dlq { to file { path = %q } }
  to redis { url = %q, stream = "orders.${payload.amount %% 2}" }
}
`, e.Input, e.DLQ, srv.URL())
	rs := runtest.RunIn(t, e.Dir, plantest.Compile(t, src)).Route("publish")
	if rs.Out != 50 || rs.DeadLettered != 50 {
		t.Fatalf("stats %+v, want 50 out and 50 dead-lettered", rs)
	}
	if lines := plantest.ReadDLQLines(t, e.DLQ); len(lines) != 50 || !hasReason(lines, "WRONGTYPE") {
		t.Errorf("DLQ holds %d lines, want 50 with WRONGTYPE", len(lines))
	}
}

// TestRedisRoundTrip: file → redis → SQLite keeps each record's
// message_id across the hop: the second route reads the id the first
// one stamped.
func TestRedisRoundTrip(t *testing.T) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	e := plantest.NewEnv(t)
	const n = 500
	plantest.WriteOrders(t, e.Input, n)
	runtest.RunIn(t, e.Dir, sinkPlan(t, e.Input, srv.URL(), "orders", ""))
	stamped := map[string]string{}
	for _, m := range readStream(t, c, "orders") {
		stamped[m.ID] = m.Values["mq_bridge.message_id"].(string)
	}
	db := filepath.Join(e.Dir, "out.db")
	p := sourcePlan(t, srv.URL(), "orders", "mqb", "", "", toSQLite(db))
	runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == n })
	runtest.CheckOrders(t, db, n)
	msgids := runtest.SQLiteMap[string](t, db, `SELECT id, msgid FROM orders`)
	for id, entry := range runtest.SQLiteMap[string](t, db, `SELECT id, entry FROM orders`) {
		if msgids[id] != stamped[entry] {
			t.Fatalf("%s (entry %s): message_id %s, the sink stamped %s", id, entry, msgids[id], stamped[entry])
		}
	}
}

// TestRedisSinkOutage: file → stream while the server is killed and
// started again two seconds later on its append-only file. With a retry
// step the route rides through; without one it stops with an error
// naming the sink (unless the client's own retries of a failed
// pipeline carried it over), and a rerun from the committed position
// appends the rest. Either way every order is in the stream, some twice (a stream
// cannot absorb a repeat: the route is at-least-once).
func TestRedisSinkOutage(t *testing.T) {
	for _, tc := range runtest.SinkOutageCases(runtest.RidesThroughOrStops) {
		t.Run(tc.Name, func(t *testing.T) {
			srv := testsrv.NewRedis(t)
			c := srv.Client(t)
			e := plantest.NewEnv(t)
			const n = 30000
			plantest.WriteOrders(t, e.Input, n)
			p := sinkPlan(t, e.Input, srv.URL(), "orders", "")
			if tc.Retry {
				p = plantest.WithRetryAt(p, len(p.Routes[0].Nodes)-1, 100)
			}
			entries := func() int64 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				n, _ := c.XLen(ctx, "orders").Result() // 0 while the server is down
				return n
			}
			rs := runtest.Outage{
				Plan: p, Route: "publish",
				Underway: func() bool { return entries() > 0 },
				Outage:   func() { srv.Kill(t); time.Sleep(2 * time.Second); srv.Start(t) },
				Done:     func() bool { return entries() >= n && len(streamOrders(t, c, "orders")) == n },
				Expect:   tc.Expect,
				StopSays: []string{"route publish", "redis sink"},
			}.Run(t)
			got := streamOrders(t, c, "orders")
			t.Logf("%d entries of %d orders; %+v", entries(), len(got), rs)
			if len(got) != n {
				t.Errorf("stream holds %d distinct orders, want %d", len(got), n)
			}
		})
	}
}

// streamOrders counts the entries of stream by their mqb.id field.
func streamOrders(t testing.TB, c *goredis.Client, stream string) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, m := range readStream(t, c, stream) {
		id, _ := m.Values["mqb.id"].(string)
		got[id]++
	}
	return got
}
