package runtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
)

func testOptions(testing.TB) Options {
	return Options{Logger: plantest.Logger()}
}

func checkCounts(t testing.TB, st RouteStats) {
	t.Helper()
	if st.In != st.Out+st.Deduplicated+st.Filtered+st.DeadLettered+st.Errors {
		t.Errorf("counts do not add up: %+v", st)
	}
}

// compileMQB compiles .mqb source the way `mqbc run` does.
var compileMQB = plantest.Compile

// runIn runs p with relative paths resolved in dir and state under dir.
// (runtest.RunIn is the same for tests outside the package, which may
// import runtime.)
func runIn(t testing.TB, dir string, p plan.Plan) Stats {
	t.Helper()
	opts := testOptions(t)
	opts.BaseDir = dir
	opts.StateDir = filepath.Join(dir, "state")
	st, err := Run(context.Background(), p, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range st.Routes {
		checkCounts(t, rs)
	}
	return st
}

var (
	writeLines = plantest.WriteLines
	sameIDs    = plantest.SameIDs
)

// runRoute runs p to its end and returns route's stats, whose counts must
// add up.
func runRoute(t testing.TB, p plan.Plan, route string) RouteStats {
	t.Helper()
	return runRouteWith(t, context.Background(), p, testOptions(t), route)
}

func runRouteWith(t testing.TB, ctx context.Context, p plan.Plan, opts Options, route string) RouteStats {
	t.Helper()
	st, err := Run(ctx, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	rs := st.Route(route)
	checkCounts(t, rs)
	return rs
}

// runCancelled runs p until it first reports progress (every interval)
// and cancels it there: a run stopped part-way, whose stats it returns.
func runCancelled(t testing.TB, p plan.Plan, route string, every time.Duration) RouteStats {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := testOptions(t)
	onFirstProgress(&opts, every, func(string) { cancel() })
	return runRouteWith(t, ctx, p, opts, route)
}

// runRefused runs p, which must fail: the error must name each of names
// and show none of secrets (a password in a url, say).
func runRefused(t *testing.T, p plan.Plan, names []string, secrets ...string) {
	t.Helper()
	_, err := Run(context.Background(), p, testOptions(t))
	plantest.CheckRefused(t, err, names, secrets...)
}

// backgroundRun is a run going on while the test acts on its route.
type backgroundRun struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the run has ended; st and err are set
	st     Stats
	err    error
}

// startRun runs p in the background under a child of ctx.
func startRun(ctx context.Context, p plan.Plan, opts Options) *backgroundRun {
	ctx, cancel := context.WithCancel(ctx)
	r := &backgroundRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.st, r.err = Run(ctx, p, opts)
	}()
	return r
}

// wait waits for the run to end and returns its stats; a failed run fails
// the test.
func (r *backgroundRun) wait(t testing.TB) Stats {
	t.Helper()
	<-r.done
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	return r.st
}

// stop cancels the run, which drains and commits, and waits for it.
func (r *backgroundRun) stop(t testing.TB) Stats {
	t.Helper()
	r.cancel()
	return r.wait(t)
}

// onFirstProgress calls f, with the progress line, the first time the run
// reports progress (every interval): the moment a test breaks something
// mid-run.
func onFirstProgress(opts *Options, every time.Duration, f func(progress string)) {
	opts.Progress = plantest.FirstWrite(f)
	opts.ProgressInterval = every
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
