package runtest

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
	"github.com/mqb-dev/mqb/runtime"
)

// BuildCrashHelper compiles runtime/internal/crashhelper (a plan run in a
// process of its own, linking every connector) once per test, for a crash
// test to SIGKILL. It skips the test under -short.
func BuildCrashHelper(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("crash tests build and kill a real process")
	}
	bin := filepath.Join(t.TempDir(), "crashhelper")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/mqb-dev/mqb/runtime/internal/crashhelper")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build crashhelper: %v\n%s", err, out)
	}
	return bin
}

// CrashUntil runs p in the crash helper bin, SIGKILLs it kills times at
// moments drawn from seed (each run must still be working when killed:
// a consumer that never reaches an end), then runs it until done() holds
// and stops it with SIGTERM (a graceful drain), returning that run's
// stats. dir holds the plan file.
func CrashUntil(t *testing.T, bin string, p plan.Plan, dir string, seed uint64, kills int, done func() bool) runtime.Stats {
	t.Helper()
	planPath := filepath.Join(dir, "plan.json")
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range kills {
		r := startHelper(t, bin, planPath)
		wait := 150*time.Millisecond + time.Duration(rng.IntN(450))*time.Millisecond
		select {
		case err := <-r.exited:
			t.Fatalf("run %d ended by itself (err %v): %s", i, err, r.stderr.String())
		case <-time.After(wait):
		}
		if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		<-r.exited
		t.Logf("run %d killed after %v %s", i, wait, strings.TrimSpace(r.stderr.String()))
	}
	final := startHelper(t, bin, planPath)
	// Killed consumers may hold what they read until the server gives it
	// out again: the wait bounds the test, it is not what it checks.
	if !WaitFor(done, 4*time.Minute, 100*time.Millisecond) {
		final.cmd.Process.Kill()
		<-final.exited
		t.Fatalf("final run did not finish in time: %s", final.stderr.String())
	}
	time.Sleep(300 * time.Millisecond) // let the last commit happen
	final.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-final.exited; err != nil {
		t.Fatalf("final run: %v\n%s", err, final.stderr.String())
	}
	var st runtime.Stats
	if err := json.Unmarshal(final.stdout.Bytes(), &st); err != nil {
		t.Fatalf("final run stats %q: %v", final.stdout.String(), err)
	}
	return st
}

// helperRun is one run of the crash helper.
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
