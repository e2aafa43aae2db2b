package runtime_test

import (
	"path/filepath"
	"testing"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
)

// buildCrashHelper compiles the crash helper once per test.
var buildCrashHelper = plantest.BuildCrashHelper

// crashAndFinish runs the plan in a real process, SIGKILLs it at kills
// seeded random moments, then lets a last run finish. It returns the last
// run's stats.
func crashAndFinish(t *testing.T, bin string, p plan.Plan, dir string, seed uint64, kills int) runtime.Stats {
	t.Helper()
	var st runtime.Stats
	plantest.CrashAndFinish(t, bin, p, dir, seed, kills, &st)
	return st
}

func TestCrashSQLiteExactlyOnce(t *testing.T) {
	bin := buildCrashHelper(t)
	for _, seed := range []uint64{11, 12} {
		e := newTestEnv(t)
		ds := genDataset(t, e.input, 150000, seed)
		st := crashAndFinish(t, bin, sqlitePlan(e, 512, 2), e.dir, seed, 4)
		rs := st.Route("orders")
		checkCounts(t, rs)
		t.Logf("seed %d: final run %+v", seed, rs)
		if rs.Committed != int64(ds.Records) {
			t.Errorf("final run committed %d of %d", rs.Committed, ds.Records)
		}
		checkSQLite(t, e.db, ds)
		// The DLQ is at-least-once across a crash: every bad line is there.
		checkDLQ(t, readDLQ(t, e.dlq), ds.Bad, false)
	}
}

func TestCrashPartsExactlyOnce(t *testing.T) {
	bin := buildCrashHelper(t)
	for _, seed := range []uint64{21, 22} {
		e := newTestEnv(t)
		ds := genDataset(t, e.input, 150000, seed)
		want, bad := partsWant(ds)
		st := crashAndFinish(t, bin, partsPlan(e, 1000, 2), e.dir, seed, 4)
		rs := st.Route("parts")
		checkCounts(t, rs)
		t.Logf("seed %d: final run %+v", seed, rs)
		checkPartsExactlyOnce(t, readParts(t, e.parts, ds), want)
		checkDLQ(t, readDLQ(t, e.dlq), bad, false)
		if tmp, _ := filepath.Glob(filepath.Join(e.parts, ".part-*")); len(tmp) > 0 {
			t.Errorf("temporary parts left behind: %v", tmp)
		}
	}
}
