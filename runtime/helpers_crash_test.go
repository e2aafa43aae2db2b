package runtime

import (
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
)

// The crash helper's process plumbing is plantest's, shared with the
// connector packages' crash tests.
var (
	writeCrashPlan = plantest.WriteCrashPlan
	startHelper    = plantest.StartHelper
	waitFor        = plantest.WaitFor
)

type helperRun = plantest.HelperRun

// stopRun lets r drain (SIGTERM) and returns the stats it printed.
func stopRun(t *testing.T, r *helperRun) Stats {
	t.Helper()
	var st Stats
	r.Stop(t, &st)
	return st
}

// finishRun waits for r to end and returns the stats it printed.
func finishRun(t *testing.T, r *helperRun) Stats {
	t.Helper()
	var st Stats
	r.Finish(t, &st)
	return st
}

var killWaits = plantest.KillWaits

// crashSchedule is plantest.CrashSchedule under the names package
// runtime's tests use.
type crashSchedule struct {
	kills    int
	wait     func() time.Duration
	mayEnd   bool
	progress func() string
}

// killRuns starts the crash helper on planPath s.kills times and SIGKILLs
// each run after its wait (plantest.KillRuns).
func killRuns(t *testing.T, bin, planPath string, s crashSchedule) {
	t.Helper()
	plantest.KillRuns(t, bin, planPath, plantest.CrashSchedule{Kills: s.kills, Wait: s.wait, MayEnd: s.mayEnd, Progress: s.progress})
}
