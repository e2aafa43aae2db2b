package runtime_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
)

// The run helpers are runtest's, shared with the connectors' tests.
var (
	testOptions  = func(testing.TB) runtime.Options { return runtest.Options() }
	checkCounts  = runtest.CheckCounts
	compileMQB   = plantest.Compile
	runIn        = runtest.RunIn
	writeLines   = plantest.WriteLines
	sameIDs      = plantest.SameIDs
	runCancelled = runtest.RunCancelled
)

// runRoute runs p to its end and returns route's stats, whose counts must
// add up.
func runRoute(t testing.TB, p plan.Plan, route string) runtime.RouteStats {
	t.Helper()
	return runtest.RunRoute(t, context.Background(), p, runtest.Options(), route)
}

func TestFileToSQLite(t *testing.T) {
	for _, tc := range []struct {
		name              string
		n, batch, workers int
	}{
		{"batch1024", 5000, 1024, 1},
		{"small batches concurrent", 3000, 7, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			ds := genDataset(t, e.input, tc.n, 1)
			rs := runRoute(t, sqlitePlan(e, tc.batch, tc.workers), "orders")
			if rs.In != int64(tc.n) || rs.Committed != int64(tc.n) {
				t.Errorf("in %d committed %d, want %d", rs.In, rs.Committed, tc.n)
			}
			if rs.Out != int64(len(ds.IDs)) || rs.Deduplicated != int64(ds.Dups) || rs.DeadLettered != int64(len(ds.Bad)) {
				t.Errorf("stats %+v, want out %d dedup %d dlq %d", rs, len(ds.IDs), ds.Dups, len(ds.Bad))
			}
			checkSQLite(t, e.db, ds)
			checkDLQ(t, readDLQ(t, e.dlq), ds.Bad, true)

			// A second run over the same file resumes at the end: nothing moves.
			if rs := runRoute(t, sqlitePlan(e, tc.batch, tc.workers), "orders"); rs.In != 0 {
				t.Errorf("rerun read %d records, want 0", rs.In)
			}
		})
	}
}

func TestRestartExactlyOnce(t *testing.T) {
	e := newTestEnv(t)
	const n = 60000
	ds := genDataset(t, e.input, n, 2)
	first := runCancelled(t, sqlitePlan(e, 256, 2), "orders", 20*time.Millisecond)
	if first.Committed >= n {
		t.Logf("first run finished before the cancel (%d records); the restart is trivial", first.Committed)
	}
	second := runRoute(t, sqlitePlan(e, 512, 1), "orders")
	if first.Committed+second.In != n {
		t.Errorf("first run committed %d, second read %d: want %d in all", first.Committed, second.In, n)
	}
	checkSQLite(t, e.db, ds)
	// A graceful drain commits everything it acked: no replay, so the DLQ
	// holds each bad line exactly once.
	checkDLQ(t, readDLQ(t, e.dlq), ds.Bad, true)
	t.Logf("first run %+v, second run %+v", first, second)
}

func TestFileSinkSourcePosition(t *testing.T) {
	e := newTestEnv(t)
	const n = 40000
	ds := genDataset(t, e.input, n, 3)
	want, bad := partsWant(ds)

	first := runCancelled(t, partsPlan(e, 300, 3), "parts", 5*time.Millisecond)
	second := runRoute(t, partsPlan(e, 300, 1), "parts")
	t.Logf("first %+v second %+v", first, second)
	checkPartsExactlyOnce(t, readParts(t, e.parts, ds), want)
	checkDLQ(t, readDLQ(t, e.dlq), bad, true)

	// A full replay (fresh checkpoint) with other batch boundaries writes
	// nothing new: every position is covered by an existing part.
	if err := os.RemoveAll(e.state); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(e.parts)
	replay := runRoute(t, partsPlan(e, 777, 2), "parts")
	if replay.In != n || replay.Out != 0 || replay.Deduplicated != int64(len(want)) {
		t.Errorf("replay %+v: want in %d, out 0, deduplicated %d", replay, n, len(want))
	}
	after, _ := os.ReadDir(e.parts)
	if len(after) != len(before) {
		t.Errorf("replay wrote %d new parts", len(after)-len(before))
	}
	checkPartsExactlyOnce(t, readParts(t, e.parts, ds), want)
}
