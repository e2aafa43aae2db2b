package runtime

import (
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
)

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
