package runtime

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
)

var (
	strV  = plantest.Str
	enumV = plantest.Enum
	intV  = plantest.Int
	exprV = plantest.Expr
	tmplV = plantest.Tmpl
	lit   = plantest.Lit
	ex    = plantest.Ex
)

// testEnv is the set of paths a test pipeline uses, all under one temp dir.
type testEnv struct {
	dir, input, db, dlq, state, dedup, parts string
}

func newTestEnv(t *testing.T) testEnv {
	e := plantest.NewEnv(t)
	return testEnv{dir: e.Dir, input: e.Input, db: e.DB, dlq: e.DLQ, state: e.State, dedup: e.Dedup, parts: e.Parts}
}

const testMaxRecord = 2048

// sqlitePlan is file → id → dedup → dlq → sqlite ON CONFLICT DO NOTHING.
func sqlitePlan(e testEnv, batch, concurrency int) plan.Plan {
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "file", Side: plan.SideInput, Attrs: map[string]plan.Value{
			"path": strV(e.input), "mode": enumV("consume"), "format": enumV("json"),
			"checkpoint_store": strV("pebble://" + e.state), "max_record_bytes": intV(testMaxRecord)}},
		{ID: "n1", Role: plan.RoleStep, Kind: "id", Side: plan.SideInput, Expr: "payload.order_id"},
		{ID: "n2", Role: plan.RoleStep, Kind: "dedup", Side: plan.SideInput, Attrs: map[string]plan.Value{
			"key": exprV(`meta["mqb.id"]`), "store": strV("pebble://" + e.dedup),
			"ttl": {Type: plan.TDuration, Str: "1h", Int: int64(3600e9)}}},
		dlqFile("n3", e.dlq, "write_time"),
		{ID: "n4", Role: plan.RoleSink, Kind: "sql", Side: plan.SideOutput, Attrs: map[string]plan.Value{
			"url":          tmplV(lit("sqlite://" + e.db)),
			"create_table": strV(`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL, body TEXT)`),
			"insert_query": tmplV(lit("INSERT INTO orders (id, amount, body) VALUES ("), ex(`meta["mqb.id"]`),
				lit(", "), ex("payload.amount"), lit(", "), ex("payload.body"), lit(") ON CONFLICT (id) DO NOTHING")),
		}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{
		Name: "orders", Guarantee: plan.EffectivelyOnce, Concurrency: concurrency, BatchSize: batch,
		Nodes: nodes, Edges: chain(nodes)}}}
}

// partsPlan is file → file (name_by = source_position), with a DLQ.
func partsPlan(e testEnv, batch, concurrency int) plan.Plan {
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "file", Attrs: map[string]plan.Value{
			"path": strV(e.input), "mode": enumV("consume"),
			"checkpoint_store": strV("pebble://" + e.state), "max_record_bytes": intV(testMaxRecord)}},
		dlqFile("n1", e.dlq, ""),
		{ID: "n2", Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{
			"path": strV(e.parts), "name_by": enumV("source_position")}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{
		Name: "parts", Guarantee: plan.EffectivelyOnce, Concurrency: concurrency, BatchSize: batch,
		Nodes: nodes, Edges: chain(nodes)}}}
}

var dlqFile = plantest.DLQFile

// withRetry inserts a retry step right before the sink.
func withRetry(p plan.Plan, attempts int64) plan.Plan {
	return withRetryAt(p, len(p.Routes[0].Nodes)-1, attempts)
}

var withRetryAt = plantest.WithRetryAt

var chain = plantest.Chain

var writeOrders = plantest.WriteOrders

// dataset is a generated input with what a correct run must produce.
type dataset struct {
	lines   []string
	ids     map[string]int  // unique valid id → amount of its first occurrence
	bad     map[uint64]bool // positions (record indexes) that must reach the DLQ
	dups    int             // valid lines whose id was seen before
	valid   []uint64        // positions of JSON-valid, short lines (for part sinks)
	records int
}

// genDataset writes n lines: mostly orders, with repeated ids, malformed
// JSON, missing ids, null amounts (NOT NULL violation) and over-long lines.
func genDataset(t testing.TB, path string, n int, seed uint64) dataset {
	rng := rand.New(rand.NewPCG(seed, 99))
	ds := dataset{ids: map[string]int{}, bad: map[uint64]bool{}}
	var b strings.Builder
	next := 0
	for i := 0; i < n; i++ {
		pos := uint64(i)
		var line string
		switch r := rng.IntN(100); {
		case r < 3:
			line = fmt.Sprintf(`{"order_id": "o-%d", "amount": 1, "body": broken`, i)
			ds.bad[pos] = true
		case r < 5:
			line = fmt.Sprintf(`{"amount": %d, "body": "no id"}`, i)
			ds.bad[pos] = true
			ds.valid = append(ds.valid, pos)
		case r < 7:
			line = fmt.Sprintf(`{"order_id": "n-%d", "amount": null, "body": "null amount"}`, i)
			ds.bad[pos] = true
			ds.valid = append(ds.valid, pos)
		case r < 8:
			line = fmt.Sprintf(`{"order_id": "l-%d", "amount": 1, "body": "%s"}`, i, strings.Repeat("x", testMaxRecord))
			ds.bad[pos] = true
		case r < 20 && next > 0:
			k := rng.IntN(next)
			line = fmt.Sprintf(`{"order_id": "o-%d", "amount": %d, "body": {"repeat": %d}}`, k, k, i)
			ds.dups++
			ds.valid = append(ds.valid, pos)
		default:
			line = fmt.Sprintf(`{"order_id": "o-%d", "amount": %d, "body": "order number %d"}`, next, next, next)
			ds.ids[fmt.Sprintf("o-%d", next)] = next
			next++
			ds.valid = append(ds.valid, pos)
		}
		ds.lines = append(ds.lines, line)
		b.WriteString(line)
		b.WriteByte('\n')
	}
	ds.records = n
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return ds
}

// checkSQLite asserts the table holds each unique valid id exactly once,
// with the amount of its first occurrence.
func checkSQLite(t *testing.T, dbPath string, ds dataset) {
	t.Helper()
	checkOrderRows(t, sqlQuery(t, sqliteDriver, "file:"+dbPath, `SELECT id, amount FROM orders`, scanOrderRows), ds, true)
}

var readDLQLines = plantest.ReadDLQLines

// readDLQ returns how many times each position appears in the DLQ file,
// checking every line carries a reason.
func readDLQ(t testing.TB, path string) map[uint64]int {
	t.Helper()
	out := map[uint64]int{}
	for _, l := range readDLQLines(t, path) {
		if l.Error == "" {
			t.Errorf("dlq line without a reason: %+v", l)
		}
		out[l.Position]++
	}
	return out
}

// checkDLQ asserts every bad position is in the DLQ (exactly once when
// exact) and nothing else is.
func checkDLQ(t testing.TB, got map[uint64]int, want map[uint64]bool, exact bool) {
	t.Helper()
	for p := range want {
		if got[p] == 0 {
			t.Errorf("bad record %d missing from the DLQ", p)
		} else if exact && got[p] != 1 {
			t.Errorf("bad record %d in the DLQ %d times", p, got[p])
		}
	}
	for p := range got {
		if !want[p] {
			t.Errorf("record %d in the DLQ but valid", p)
		}
	}
}
