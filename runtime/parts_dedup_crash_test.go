package runtime_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/mqb-dev/mqb/plan"
)

// dedupPartsPlan is file → id → dedup → dlq → file (name_by =
// source_position): the dedup decisions decide which positions the parts
// hold.
func dedupPartsPlan(e testEnv, batch, concurrency int) plan.Plan {
	p := partsPlan(e, batch, concurrency)
	nodes := p.Routes[0].Nodes
	steps := []plan.Node{
		{ID: "s1", Role: plan.RoleStep, Kind: "id", Side: plan.SideInput, Expr: "payload.order_id"},
		{ID: "s2", Role: plan.RoleStep, Kind: "dedup", Side: plan.SideInput, Attrs: map[string]plan.Value{
			"key": exprV(`meta["mqb.id"]`), "store": strV("pebble://" + e.dedup),
			"ttl": {Type: plan.TDuration, Str: "1h", Int: int64(3600e9)}}},
	}
	p.Routes[0].Nodes = append(append(nodes[:1:1], steps...), nodes[1:]...)
	p.Routes[0].Edges = chain(p.Routes[0].Nodes)
	return p
}

// dedupPartsWant is the positions a clean run of dedupPartsPlan writes: the
// first occurrence of each order id among the lines that decode and fit.
func dedupPartsWant(ds dataset) map[uint64]bool {
	want := map[uint64]bool{}
	seen := map[string]bool{}
	for p, line := range ds.Lines {
		var v struct {
			OrderID *string `json:"order_id"`
		}
		if len(line) > testMaxRecord || json.Unmarshal([]byte(line), &v) != nil || v.OrderID == nil || seen[*v.OrderID] {
			continue
		}
		seen[*v.OrderID] = true
		want[uint64(p)] = true
	}
	return want
}

// A dedup step in front of positional parts is replay-stable: a kill after
// a part is durable and before its records' dedup keys are promoted must
// not let a later repeat of those keys through on the next run (the
// records a part covers still pass the dedup step, which remembers their
// keys, and only the sink skips them). One worker: with several, which
// record of a key is first to be reserved depends on timing, so the
// positions of a clean run are not fixed either.
func TestCrashDedupPartsExactlyOnce(t *testing.T) {
	bin := buildCrashHelper(t)
	for _, seed := range []uint64{31, 32} {
		e := newTestEnv(t)
		ds := genDataset(t, e.input, 150000, seed)
		want := dedupPartsWant(ds)
		st := crashAndFinish(t, bin, dedupPartsPlan(e, 1000, 1), e.dir, seed, 4)
		rs := st.Route("parts")
		checkCounts(t, rs)
		t.Logf("seed %d: final run %+v", seed, rs)
		checkPartsExactlyOnce(t, readParts(t, e.parts, ds), want)
	}
}

// The state a kill leaves between a part's write and the promotion of its
// keys, made without a kill: the parts of a first run stay, its dedup
// store and checkpoint go, and the input grows by repeats of the ids
// already written. The second run must remember the covered records' keys
// and drop every repeat.
func TestDedupPartsRemembersCoveredKeys(t *testing.T) {
	e := newTestEnv(t)
	ds := genDataset(t, e.input, 3000, 5)
	runRoute(t, dedupPartsPlan(e, 100, 1), "parts")
	want := dedupPartsWant(ds)
	checkPartsExactlyOnce(t, readParts(t, e.parts, ds), want)

	for _, dir := range []string{e.state, e.dedup} {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(e.input, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		line := fmt.Sprintf(`{"order_id": "o-%d", "amount": %d, "body": "a repeat"}`, i, i)
		ds.Lines = append(ds.Lines, line)
		if _, err := f.WriteString(line + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rs := runRoute(t, dedupPartsPlan(e, 100, 1), "parts")
	if rs.Out != 0 {
		t.Errorf("second run %+v: want out 0 (every record is covered or a repeat)", rs)
	}
	checkPartsExactlyOnce(t, readParts(t, e.parts, ds), want)
}
