package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/plan"
)

// writeCrashPlan stores p as dir/plan.json, the file the crash helper runs.
func writeCrashPlan(t *testing.T, p plan.Plan, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "plan.json")
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// helperRun is one run of the crash helper (see buildCrashHelper).
type helperRun struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	exited         chan error // the run's exit, once it has ended
}

func startHelper(t *testing.T, bin, planPath string) *helperRun {
	t.Helper()
	r := &helperRun{cmd: exec.Command(bin, "-plan", planPath), exited: make(chan error, 1)}
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.exited <- r.cmd.Wait() }()
	return r
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
		case err := <-r.exited:
			if !s.mayEnd {
				t.Fatalf("run %d ended by itself (err %v): %s", i, err, r.stderr.String())
			}
			t.Logf("run %d ended by itself before the kill at %v (err %v): %s", i, wait, err, r.stderr.String())
			continue
		case <-time.After(wait):
		}
		if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		<-r.exited
		var progress string
		if s.progress != nil {
			progress = " " + s.progress()
		}
		t.Logf("run %d killed after %v%s %s", i, wait, progress, strings.TrimSpace(r.stderr.String()))
	}
}

// waitFor polls done every interval until it holds or timeout has passed,
// and says whether it held.
func waitFor(done func() bool, timeout, every time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}

// stop lets the run drain (SIGTERM) and returns the stats it printed; a
// run that fails or prints no stats fails the test.
func (r *helperRun) stop(t *testing.T) Stats {
	t.Helper()
	r.cmd.Process.Signal(syscall.SIGTERM)
	return r.finish(t)
}

// finish waits for the run to end and returns the stats it printed.
func (r *helperRun) finish(t *testing.T) Stats {
	t.Helper()
	if err := <-r.exited; err != nil {
		t.Fatalf("final run: %v\n%s", err, r.stderr.String())
	}
	var st Stats
	if err := json.Unmarshal(r.stdout.Bytes(), &st); err != nil {
		t.Fatalf("final run stats %q: %v", r.stdout.String(), err)
	}
	return st
}
