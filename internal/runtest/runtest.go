// Package runtest holds the helpers a connector's tests use to run plans
// with the runtime: a run in a directory with its state under it, the
// options a test run gets, the count check every run's stats must pass,
// a benchmark loop, a run in the background (Start, RunUntil), readers of
// the SQLite table a route wrote, a crash loop that SIGKILLs the crash
// helper (a plan run in a process of its own) at seeded moments, and a
// run through an outage of a server the route talks to (Outage).
// The helpers that only build plans and read files are in
// internal/plantest.
//
// Package runtime's engine tests that run routes are an external test
// package (runtime_test), which imports this one like any connector's.
package runtest

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// Options are the options a test run gets: logs of errors only, all of
// them under go test -v.
func Options() runtime.Options {
	return runtime.Options{Logger: plantest.Logger()}
}

// CheckCounts fails the test when a route's counts do not add up: every
// record read is delivered, deduplicated, filtered, dead-lettered or an
// error.
func CheckCounts(t testing.TB, st runtime.RouteStats) {
	t.Helper()
	if st.In+st.Added != st.Out+st.Deduplicated+st.Filtered+st.DeadLettered+st.Errors {
		t.Errorf("counts do not add up: %+v", st)
	}
}

// RunRoute runs p under opts to its end and returns route's stats,
// whose counts must add up.
func RunRoute(t testing.TB, ctx context.Context, p plan.Plan, opts runtime.Options, route string) runtime.RouteStats {
	t.Helper()
	st, err := runtime.Run(ctx, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	rs := st.Route(route)
	CheckCounts(t, rs)
	return rs
}

// RunCancelled runs p until it first reports progress (every interval)
// and cancels it there: a run stopped part-way, whose route stats it
// returns.
func RunCancelled(t testing.TB, p plan.Plan, route string, every time.Duration) runtime.RouteStats {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := Options()
	OnFirstProgress(&opts, every, func(string) { cancel() })
	return RunRoute(t, ctx, p, opts, route)
}

// OnFirstProgress calls f, with the progress line, the first time the run
// reports progress (every interval): the moment a test breaks something
// mid-run.
func OnFirstProgress(opts *runtime.Options, every time.Duration, f func(progress string)) {
	opts.Progress = plantest.FirstWrite(f)
	opts.ProgressInterval = every
}

// CheckSQLite asserts table orders of the SQLite database at db holds each
// of ds's unique valid ids once, with the amount of its first occurrence.
func CheckSQLite(t testing.TB, db string, ds plantest.Dataset) {
	t.Helper()
	plantest.CheckOrderRows(t, SQLiteMap[int](t, db, `SELECT id, amount FROM orders`), ds, true)
}

// RunRefused runs p and fails the test unless the run fails with an error
// naming every one of names and showing none of secrets.
func RunRefused(t *testing.T, p plan.Plan, names []string, secrets ...string) {
	t.Helper()
	_, err := runtime.Run(context.Background(), p, Options())
	plantest.CheckRefused(t, err, names, secrets...)
}

// RunIn runs p with relative paths resolved in dir and state under
// dir/state, as `mqbc run` in dir would, and checks each route's counts.
func RunIn(t testing.TB, dir string, p plan.Plan) runtime.Stats {
	t.Helper()
	opts := Options()
	opts.BaseDir = dir
	opts.StateDir = filepath.Join(dir, "state")
	st, err := runtime.Run(context.Background(), p, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range st.Routes {
		CheckCounts(t, rs)
	}
	return st
}

// InsertedExisted is plantest.InsertedExisted run with RunIn: a
// report_outcome route's inserted and existed branches over two runs.
func InsertedExisted(t *testing.T, dir string, compile func(input string) plan.Plan, bad string) {
	t.Helper()
	plantest.InsertedExisted(t, dir, compile, bad, func(dir string, p plan.Plan) plantest.Counts {
		st := RunIn(t, dir, p).Route("upsert_branch")
		return plantest.Counts{In: st.In, Out: st.Out, Failed: st.DeadLettered + st.Errors}
	})
}

// Bench runs the plan mkPlan makes once per iteration, with a fresh state
// directory, and reports records/s and the input's size per second; the
// first route must deliver n records.
func Bench(b *testing.B, n int, size int64, mkPlan func(i int, state string) plan.Plan) {
	b.Helper()
	b.SetBytes(size)
	opts := runtime.Options{Logger: slog.New(slog.DiscardHandler)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		state := filepath.Join(b.TempDir(), "state")
		p := mkPlan(i, state)
		b.StartTimer()
		st, err := runtime.Run(context.Background(), p, opts)
		if err != nil {
			b.Fatal(err)
		}
		if rs := st.Routes[0]; rs.Out != int64(n) {
			b.Fatalf("%+v, want out %d", rs, n)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
