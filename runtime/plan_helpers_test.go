package runtime_test

import (
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
)

var (
	strV  = plantest.Str
	enumV = plantest.Enum
	intV  = plantest.Int
	exprV = plantest.Expr
)

// testEnv is the set of paths a test pipeline uses, all under one temp dir.
type testEnv struct {
	dir, input, db, dlq, state, dedup, parts string
}

func newTestEnv(t *testing.T) testEnv {
	e := plantest.NewEnv(t)
	return testEnv{dir: e.Dir, input: e.Input, db: e.DB, dlq: e.DLQ, state: e.State, dedup: e.Dedup, parts: e.Parts}
}

const testMaxRecord = plantest.MaxRecordBytes

// sqlitePlan is file → id → dedup → dlq → sqlite ON CONFLICT DO NOTHING
// (plantest.SQLitePlan) over e's paths.
func sqlitePlan(e testEnv, batch, concurrency int) plan.Plan {
	return plantest.SQLitePlan(e.input, e.state, e.dedup, e.dlq, e.db, batch, concurrency)
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

var chain = plantest.Chain

// The generated dataset and the checks of what a run made of it are
// plantest's, shared with the connector packages' tests.
type dataset = plantest.Dataset

var (
	genDataset            = plantest.GenDataset
	readParts             = plantest.ReadParts
	partsWant             = plantest.PartsWant
	checkPartsExactlyOnce = plantest.CheckPartsExactlyOnce
	readDLQ               = plantest.ReadDLQ
	readDLQLines          = plantest.ReadDLQLines
	checkDLQ              = plantest.CheckDLQ
	checkOrderRows        = plantest.CheckOrderRows
	sqliteIDs             = plantest.SQLiteIDs
)

// checkSQLite asserts the table holds each unique valid id exactly once,
// with the amount of its first occurrence.
func checkSQLite(t *testing.T, dbPath string, ds dataset) {
	t.Helper()
	checkOrderRows(t, sqlQuery(t, plantest.SQLiteDriver, "file:"+dbPath, `SELECT id, amount FROM orders`, scanOrderRows), ds, true)
}
