package sql

import (
	"context"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestMain stops the servers testsrv started (PostgreSQL, MariaDB, …) when
// the package's tests end.
func TestMain(m *testing.M) { testsrv.Main(m) }

// pgStaging reports, of a sql sink on PostgreSQL, whether its
// insert_query is staged (one statement per chunk of a batch, over
// parameter arrays), how many chunks it staged and whether staging was
// turned off.
func pgStaging(s runtime.Sink) (staging bool, staged int64, off bool) {
	srv := s.(*sqlSink).server
	return srv.stage != nil, srv.staged.Load(), srv.stageOff.Load()
}

// noSplit makes a PostgreSQL sql sink write its staged statement alone,
// never a split write (pgsplit.go): for the tests of that statement.
func noSplit(s runtime.Sink) { s.(*sqlSink).server.split = nil }

// pgSplitting reports, of a sql sink on PostgreSQL, whether it makes
// split writes, how many batches went that way and how many split writes
// COPY refused.
func pgSplitting(s runtime.Sink) (on bool, copied, missed int64) {
	sp := s.(*sqlSink).server.split
	if sp == nil {
		return false, 0, 0
	}
	return true, sp.copied.Load(), sp.missed.Load()
}

var (
	strV  = plantest.Str
	enumV = plantest.Enum
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

var dlqFile = plantest.DLQFile

// withRetry inserts a retry step right before the sink.
func withRetry(p plan.Plan, attempts int64) plan.Plan {
	return withRetryAt(p, len(p.Routes[0].Nodes)-1, attempts)
}

var withRetryAt = plantest.WithRetryAt

var chain = plantest.Chain

// The generated dataset and the checks of what a run made of it are
// plantest's, shared with the connector packages' tests.
type dataset = plantest.Dataset

var (
	genDataset     = plantest.GenDataset
	readDLQ        = plantest.ReadDLQ
	readDLQLines   = plantest.ReadDLQLines
	checkDLQ       = plantest.CheckDLQ
	checkOrderRows = plantest.CheckOrderRows
)

// sqlQuery runs query on a fresh database/sql connection and hands its
// rows to scan.
func sqlQuery[T any](t *testing.T, driver, dsn, query string, scan func(*testing.T, sqlRows) T) T {
	t.Helper()
	return plantest.SQLQuery(t, driver, dsn, query, scan)
}

// sqliteMap reads the (key, value) rows query returns from the SQLite
// database at dbPath, opened read-only.
func sqliteMap[V any](t *testing.T, dbPath, query string) map[string]V {
	t.Helper()
	return sqlQuery(t, sqliteDriver, "file:"+dbPath+"?mode=ro", query, scanPairs[V])
}

// scanPairs reads rows of (key, value) into a map, failing on a key seen
// twice.
func scanPairs[V any](t *testing.T, rows sqlRows) map[string]V { return plantest.ScanPairs[V](t, rows) }

// The crash helper's process plumbing is plantest's, shared with the
// connector packages' crash tests.
var (
	writeCrashPlan = plantest.WriteCrashPlan
	startHelper    = plantest.StartHelper
	waitFor        = plantest.WaitFor
	killRuns       = plantest.KillRuns
	killWaits      = plantest.KillWaits
)

type (
	helperRun     = plantest.HelperRun
	crashSchedule = plantest.CrashSchedule
)

// stopRun lets r drain (SIGTERM) and returns the stats it printed.
func stopRun(t *testing.T, r *helperRun) runtime.Stats {
	t.Helper()
	var st runtime.Stats
	r.Stop(t, &st)
	return st
}

// finishRun waits for r to end and returns the stats it printed.
func finishRun(t *testing.T, r *helperRun) runtime.Stats {
	t.Helper()
	var st runtime.Stats
	r.Finish(t, &st)
	return st
}

// The run helpers are runtest's, shared with the connectors' tests.
var (
	testOptions = func(testing.TB) runtime.Options { return runtest.Options() }
	checkCounts = runtest.CheckCounts
	compileMQB  = plantest.Compile
	runIn       = runtest.RunIn
	writeLines  = plantest.WriteLines
)

// runRoute runs p to its end and returns route's stats, whose counts must
// add up.
func runRoute(t testing.TB, p plan.Plan, route string) runtime.RouteStats {
	t.Helper()
	return runtest.RunRoute(t, context.Background(), p, runtest.Options(), route)
}

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
