package clickhouse

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	_ "github.com/mqb-dev/mqb/connector/structural" // the fanout of TestClickHouseSinkRefusesNonReplacing
	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// clickhouseDB starts (or shares) the ClickHouse server and returns a
// fresh database's URL and a connection to it. testsrv skips the test,
// naming the package, where clickhouse-server is not installed.
func clickhouseDB(t *testing.T) (string, driver.Conn) {
	t.Helper()
	srv := testsrv.SharedClickHouse(t)
	db := srv.NewDatabase(t)
	return db.URL, clickhouseConn(t, srv.NativeAddr(), db.Name)
}

// clickhouseConn opens a connection to database name on the server's
// native port, closed when the test ends.
func clickhouseConn(t *testing.T, addr, name string) driver.Conn {
	t.Helper()
	conn, err := chgo.Open(&chgo.Options{Addr: []string{addr},
		Auth:        chgo.Auth{Database: name, Username: "default"},
		DialTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func clickhousePlan(e plantest.Env, url, guarantee string, sinkAttrs map[string]plan.Value) plan.Plan {
	sinkAttrs["url"] = plantest.Str(url)
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "file", Attrs: map[string]plan.Value{
			"path": plantest.Str(e.Input), "mode": plantest.Enum("consume"), "checkpoint_store": plantest.Str("pebble://" + e.State)}},
		{ID: "n1", Role: plan.RoleStep, Kind: "id", Side: plan.SideInput, Expr: "payload.order_id"},
		plantest.DLQFile("n2", e.DLQ, ""),
		{ID: "n3", Role: plan.RoleSink, Kind: "clickhouse", Side: plan.SideOutput, Attrs: sinkAttrs},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{
		Name: "analytics", Guarantee: guarantee, Concurrency: 2, BatchSize: 100,
		Nodes: nodes, Edges: plantest.Chain(nodes)}}}
}

// A full replay into a ReplacingMergeTree table stores every row again,
// and SELECT … FINAL still holds each key once, at its highest version.
func TestClickHouseSinkReplacingMergeTree(t *testing.T) {
	url, conn := clickhouseDB(t)
	ctx := context.Background()
	if err := conn.Exec(ctx, `CREATE TABLE orders (id String, amount Int64, body String, at DateTime, version UInt64)
		ENGINE = ReplacingMergeTree(version) ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	e := plantest.NewEnv(t)
	const n, keys = 2000, 300
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"order_id":"o-%d","amount":%d,"body":{"n":%d},"at":"2026-01-02T03:04:05Z","version":%d}`+"\n", i%keys, i, i, i+1)
	}
	b.WriteString(`{"order_id":"bad","amount":"not a number","at":"2026-01-02T03:04:05Z","version":1}` + "\n")
	if err := os.WriteFile(e.Input, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	attrs := func() map[string]plan.Value {
		return map[string]plan.Value{"table": plantest.Str("orders"), "version": plantest.Expr("payload.version"),
			"columns": {Type: plan.TBlock, Block: map[string]plan.Value{
				"id": plantest.Expr(`meta["mqb.id"]`), "amount": plantest.Expr("payload.amount"),
				"body": plantest.Expr("payload.body"), "at": plantest.Expr("payload.at")}}}
	}
	for run := range 2 {
		st, err := runtime.Run(ctx, clickhousePlan(e, url, plan.EffectivelyOnce, attrs()), runtest.Options())
		if err != nil {
			t.Fatal(err)
		}
		rs := st.Route("analytics")
		runtest.CheckCounts(t, rs)
		if rs.Out != n || rs.DeadLettered != 1 {
			t.Errorf("run %d: %+v, want out %d and the bad row dead-lettered", run, rs, n)
		}
		os.RemoveAll(e.State) // the next run replays the whole file
	}
	var total uint64
	if err := conn.QueryRow(ctx, `SELECT count() FROM orders`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT id, amount, body, version FROM orders FINAL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int64{}
	for rows.Next() {
		var id, body string
		var amount int64
		var version uint64
		if err := rows.Scan(&id, &amount, &body, &version); err != nil {
			t.Fatal(err)
		}
		if _, dup := got[id]; dup {
			t.Errorf("id %s twice in FINAL", id)
		}
		got[id] = amount
		if want := fmt.Sprintf(`{"n":%d}`, amount); body != want || version != uint64(amount+1) {
			t.Errorf("id %s: body %s version %d, want %s version %d", id, body, version, want, amount+1)
		}
	}
	if len(got) != keys {
		t.Errorf("FINAL holds %d keys, want %d", len(got), keys)
	}
	for k := range keys {
		last := int64((n-1)/keys*keys + k)
		if last >= n {
			last -= keys
		}
		if got[fmt.Sprintf("o-%d", k)] != last {
			t.Errorf("o-%d: amount %d, want the highest version's %d", k, got[fmt.Sprintf("o-%d", k)], last)
		}
	}
	t.Logf("%d rows before FINAL (merges collapse repeats in the background), %d keys in FINAL", total, len(got))
}

// Without a columns block the payload's top-level fields fill the table's
// columns; a DEFAULT column is left to the server.
func TestClickHouseSinkPayloadColumns(t *testing.T) {
	url, conn := clickhouseDB(t)
	ctx := context.Background()
	if err := conn.Exec(ctx, `CREATE TABLE events (order_id String, amount Nullable(Int32), ok UInt8, ingested String DEFAULT 'server')
		ENGINE = MergeTree ORDER BY order_id`); err != nil {
		t.Fatal(err)
	}
	e := plantest.NewEnv(t)
	var b strings.Builder
	const n = 500
	for i := range n {
		amount := fmt.Sprint(i)
		if i%10 == 0 {
			amount = "null"
		}
		fmt.Fprintf(&b, `{"order_id":"o-%d","amount":%s,"ok":%v,"extra":"ignored"}`+"\n", i, amount, i%2 == 0)
	}
	if err := os.WriteFile(e.Input, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := runtime.Run(ctx, clickhousePlan(e, url, plan.AtLeastOnce, map[string]plan.Value{"table": plantest.Str("events")}), runtest.Options())
	if err != nil {
		t.Fatal(err)
	}
	if rs := st.Route("analytics"); rs.Out != n {
		t.Fatalf("%+v, want out %d", rs, n)
	}
	var count, nulls, oks uint64
	var ingested string
	if err := conn.QueryRow(ctx, `SELECT count(), countIf(isNull(amount)), sum(ok), any(ingested) FROM events`).Scan(&count, &nulls, &oks, &ingested); err != nil {
		t.Fatal(err)
	}
	if count != n || nulls != n/10 || oks != n/2 || ingested != "server" {
		t.Errorf("count %d nulls %d ok %d ingested %q", count, nulls, oks, ingested)
	}
}

// A route planned effectively-once refuses to start against a table that
// cannot absorb a repeat, whether the table is the route's sink or a
// branch of a sink made of sinks (here the second target of a fanout).
func TestClickHouseSinkRefusesNonReplacing(t *testing.T) {
	url, conn := clickhouseDB(t)
	if err := conn.Exec(context.Background(), `CREATE TABLE plain (order_id String) ENGINE = MergeTree ORDER BY order_id`); err != nil {
		t.Fatal(err)
	}
	inFanout := func(p plan.Plan, e plantest.Env) plan.Plan {
		sink := &p.Routes[0].Nodes[3]
		ch := *sink
		ch.ID = sink.ID + ".1"
		*sink = plan.Node{ID: sink.ID, Role: plan.RoleSink, Kind: "fanout", Side: plan.SideOutput, Children: []plan.Branch{
			{Label: plan.BranchTo, Node: plan.Node{ID: sink.ID + ".0", Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{
				"path": plantest.Str(e.Parts), "name_by": plantest.Enum("source_position")}}},
			{Label: plan.BranchTo, Node: ch},
		}}
		return p
	}
	for _, tc := range []struct {
		name  string
		shape func(plan.Plan, plantest.Env) plan.Plan
	}{
		{"the sink", func(p plan.Plan, _ plantest.Env) plan.Plan { return p }},
		{"a fanout's target", inFanout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := plantest.NewEnv(t)
			plantest.WriteOrders(t, e.Input, 3)
			routePlan := func(guarantee string) plan.Plan {
				return tc.shape(clickhousePlan(e, url, guarantee, map[string]plan.Value{"table": plantest.Str("plain")}), e)
			}
			runtest.RunRefused(t, routePlan(plan.EffectivelyOnce), []string{"route analytics", ".plain has engine MergeTree"})
			// At-least-once, the same table is fine.
			st, err := runtime.Run(context.Background(), routePlan(plan.AtLeastOnce), runtest.Options())
			if err != nil {
				t.Fatal(err)
			}
			if rs := st.Route("analytics"); rs.Out != 3 {
				t.Errorf("%+v, want out 3", rs)
			}
		})
	}
}

// A password in the url appears in no error.
func TestClickHouseSinkRedactsPassword(t *testing.T) {
	e := plantest.NewEnv(t)
	plantest.WriteOrders(t, e.Input, 1)
	runtest.RunRefused(t, clickhousePlan(e, "clickhouse://default:s3cret@127.0.0.1:1/db", plan.AtLeastOnce,
		map[string]plan.Value{"table": plantest.Str("t")}), []string{"route analytics"}, "s3cret")
}

// The server is killed mid-run and started again: the retry step repeats
// the failed inserts, and FINAL holds every key once.
func TestClickHouseSinkServerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private ClickHouse server")
	}
	srv := testsrv.NewClickHouse(t)
	db := srv.NewDatabase(t)
	conn := clickhouseConn(t, srv.NativeAddr(), db.Name)
	ctx := context.Background()
	if err := conn.Exec(ctx, `CREATE TABLE orders (id String, amount Int64, version UInt64)
		ENGINE = ReplacingMergeTree(version) ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	e := plantest.NewEnv(t)
	const n = 200000
	plantest.WriteOrders(t, e.Input, n)
	p := clickhousePlan(e, db.URL, plan.EffectivelyOnce, map[string]plan.Value{"table": plantest.Str("orders"),
		"version": plantest.Expr("payload.amount"),
		"columns": {Type: plan.TBlock, Block: map[string]plan.Value{"id": plantest.Expr(`meta["mqb.id"]`), "amount": plantest.Expr("payload.amount")}}})
	p = plantest.WithRetryAt(p, 2, 200) // before the DLQ
	opts := runtest.Options()
	runtest.OnFirstProgress(&opts, 50*time.Millisecond, func(progress string) {
		t.Logf("killing the server: %s", progress)
		srv.Kill(t)
		srv.Start(t)
	})
	rs := runtest.RunRoute(t, ctx, p, opts, "analytics")
	if rs.Out != n {
		t.Errorf("%+v, want out %d", rs, n)
	}
	conn2 := clickhouseConn(t, srv.NativeAddr(), db.Name)
	var keys, total uint64
	if err := conn2.QueryRow(ctx, `SELECT count() FROM orders FINAL`).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if err := conn2.QueryRow(ctx, `SELECT count() FROM orders`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if keys != n {
		t.Errorf("FINAL holds %d keys, want %d", keys, n)
	}
	t.Logf("%d rows, %d keys in FINAL; %+v", total, keys, rs)
}

// The route reuses a written batch's records and payload bytes for a
// later batch (the sink says it keeps none of them), and payload fields
// are decoded as views of those bytes: every row must still hold its own
// record's values, in every column kind, across many batches written two
// at a time.
func TestClickHouseSinkReusedBatches(t *testing.T) {
	url, conn := clickhouseDB(t)
	ctx := context.Background()
	// ClickHouse 18 has LowCardinality behind a setting.
	lc := chgo.Context(ctx, chgo.WithSettings(chgo.Settings{"allow_experimental_low_cardinality_type": 1}))
	if err := conn.Exec(lc, `CREATE TABLE reuse (order_id String, tag LowCardinality(String), body String,
		note Nullable(String), amount Int64, ratio Float64, uid UUID) ENGINE = MergeTree ORDER BY order_id`); err != nil {
		t.Fatal(err)
	}
	e := plantest.NewEnv(t)
	const n = 5000
	type row struct {
		tag, body, note, uid string
		amount               int64
		ratio                float64
	}
	want := map[string]row{}
	var b strings.Builder
	for i := range n {
		r := row{tag: fmt.Sprintf("tag-%d", i%13), body: fmt.Sprintf("order %d %s", i, strings.Repeat("x", i%41)),
			amount: int64(i) * 1000003, ratio: float64(i) / 8, uid: fmt.Sprintf("00000000-0000-4000-8000-%012d", i)}
		note := "null"
		if i%3 != 0 {
			r.note = fmt.Sprintf(`n"%d`, i) // escaped in the JSON: decoded into a string of its own
			note = fmt.Sprintf(`"n\"%d"`, i)
		}
		id := fmt.Sprintf("o-%d", i)
		want[id] = r
		fmt.Fprintf(&b, `{"order_id":%q,"tag":%q,"body":%q,"note":%s,"amount":%d,"ratio":%v,"uid":%q}`+"\n",
			id, r.tag, r.body, note, r.amount, r.ratio, r.uid)
	}
	if err := os.WriteFile(e.Input, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := runtime.Run(ctx, clickhousePlan(e, url, plan.AtLeastOnce, map[string]plan.Value{"table": plantest.Str("reuse")}), runtest.Options())
	if err != nil {
		t.Fatal(err)
	}
	if rs := st.Route("analytics"); rs.Out != n {
		t.Fatalf("%+v, want out %d", rs, n)
	}
	rows, err := conn.Query(ctx, `SELECT order_id, tag, body, note, amount, ratio, toString(uid) FROM reuse`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var id string
		var r row
		var note *string
		if err := rows.Scan(&id, &r.tag, &r.body, &note, &r.amount, &r.ratio, &r.uid); err != nil {
			t.Fatal(err)
		}
		if note != nil {
			r.note = *note
		}
		if w, ok := want[id]; !ok || r != w {
			t.Errorf("row %s: %+v, want %+v", id, r, w)
		}
		delete(want, id)
		got++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if got != n || len(want) != 0 {
		t.Errorf("%d rows, %d of the input's missing", got, len(want))
	}
}
