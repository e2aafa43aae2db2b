package runtest

import (
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// BuildCrashHelper compiles the crash helper (plantest.BuildCrashHelper).
var BuildCrashHelper = plantest.BuildCrashHelper

// CrashUntil runs p in the crash helper bin, SIGKILLs it kills times at
// moments drawn from seed (each run must still be working when killed:
// a consumer that never reaches an end), then runs it until done() holds
// and stops it with SIGTERM (a graceful drain), returning that run's
// stats. dir holds the plan file.
func CrashUntil(t *testing.T, bin string, p plan.Plan, dir string, seed uint64, kills int, done func() bool) runtime.Stats {
	t.Helper()
	planPath := plantest.WriteCrashPlan(t, p, dir)
	plantest.KillRuns(t, bin, planPath, plantest.CrashSchedule{Kills: kills, Wait: plantest.KillWaits(seed, 7, 150*time.Millisecond, 450*time.Millisecond)})
	t.Setenv("MQB_CRASH_LOG", "info") // the final run's log, should it not finish
	final := plantest.StartHelper(t, bin, planPath)
	// Killed consumers may hold what they read until the server gives it
	// out again: the wait bounds the test, it is not what it checks.
	if !WaitFor(done, 4*time.Minute, 100*time.Millisecond) {
		final.Cmd.Process.Kill()
		<-final.Exited
		t.Fatalf("final run did not finish in time; the end of its log:\n%s", tail(final.Stderr.String(), 60))
	}
	time.Sleep(300 * time.Millisecond) // let the last commit happen
	var st runtime.Stats
	final.Stop(t, &st)
	return st
}

// CrashAndFinish runs p in the crash helper bin, SIGKILLs it kills times
// at moments drawn from seed (a run that ends by itself before its kill
// is only logged), then lets a last run finish and returns its stats. dir
// holds the plan file.
func CrashAndFinish(t *testing.T, bin string, p plan.Plan, dir string, seed uint64, kills int) runtime.Stats {
	t.Helper()
	planPath := plantest.WriteCrashPlan(t, p, dir)
	plantest.KillRuns(t, bin, planPath, plantest.CrashSchedule{Kills: kills, Wait: plantest.KillWaits(seed, 5, 50*time.Millisecond, 450*time.Millisecond), MayEnd: true})
	var st runtime.Stats
	plantest.StartHelper(t, bin, planPath).Finish(t, &st)
	return st
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
