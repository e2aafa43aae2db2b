package runtime

import (
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
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

// killWaits draws how long each run lives before its SIGKILL: least plus
// up to spread, from a PCG seeded with (seed, stream) so that a failing
// schedule can be replayed.
func killWaits(seed, stream uint64, least, spread time.Duration) func() time.Duration {
	rng := rand.New(rand.NewPCG(seed, stream))
	return func() time.Duration {
		return least + time.Duration(rng.IntN(int(spread/time.Millisecond)))*time.Millisecond
	}
}

// crashSchedule is how a crash test kills the helper before its last run.
type crashSchedule struct {
	kills int
	wait  func() time.Duration // see killWaits
	// mayEnd says a run that ends by itself before its kill is only
	// logged; otherwise it fails the test (the route should still be
	// working then, e.g. a consumer that never reaches an end).
	mayEnd bool
	// progress, when set, says what the killed runs had done so far
	// (rows written, say) for the log.
	progress func() string
}

// killRuns starts the crash helper on planPath s.kills times and SIGKILLs
// each run after its wait.
func killRuns(t *testing.T, bin, planPath string, s crashSchedule) {
	t.Helper()
	for i := range s.kills {
		r := startHelper(t, bin, planPath)
		wait := s.wait()
		select {
		case err := <-r.Exited:
			if !s.mayEnd {
				t.Fatalf("run %d ended by itself (err %v): %s", i, err, r.Stderr.String())
			}
			t.Logf("run %d ended by itself before the kill at %v (err %v): %s", i, wait, err, r.Stderr.String())
			continue
		case <-time.After(wait):
		}
		if err := r.Cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		<-r.Exited
		var progress string
		if s.progress != nil {
			progress = " " + s.progress()
		}
		t.Logf("run %d killed after %v%s %s", i, wait, progress, strings.TrimSpace(r.Stderr.String()))
	}
}
