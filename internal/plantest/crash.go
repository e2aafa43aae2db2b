package plantest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/plan"
)

// The crash helper (runtime/internal/crashhelper) runs a plan in a process
// of its own, linking every connector, for a crash test to SIGKILL. These
// helpers start, kill and stop it; they decode the stats it prints into
// whatever the caller passes (runtime.Stats), so that package runtime's own
// tests and the connectors' can share them.

// BuildCrashHelper returns the path of a crash helper binary of the test's
// own (in its TempDir). It is compiled once per test process: linking
// every connector takes 5–15 s, and a package's crash tests each asked for
// it. It skips the test under -short.
func BuildCrashHelper(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("crash tests build and kill a real process")
	}
	crashHelper.once.Do(func() { crashHelper.f, crashHelper.err = buildCrashHelper() })
	if crashHelper.err != nil {
		t.Fatal(crashHelper.err)
	}
	bin := filepath.Join(t.TempDir(), "crashhelper")
	if err := copyExecutable(bin, crashHelper.f); err != nil {
		t.Fatalf("crash helper: %v", err)
	}
	return bin
}

// crashHelper is the process's compiled crash helper: an open file whose
// directory is already removed, so that nothing is left behind however
// the test process ends; each test gets a copy.
var crashHelper struct {
	once sync.Once
	f    *os.File
	err  error
}

func buildCrashHelper() (*os.File, error) {
	dir, err := os.MkdirTemp("", "mqb-crashhelper-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "crashhelper")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/mqb-dev/mqb/runtime/internal/crashhelper")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build crashhelper: %v\n%s", err, out)
	}
	return os.Open(bin)
}

// copyExecutable writes the whole of src to a new executable file at path.
func copyExecutable(path string, src *os.File) error {
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	dst, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, io.NewSectionReader(src, 0, fi.Size())); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// WriteCrashPlan stores p as dir/plan.json, the file the crash helper
// runs, and returns its path.
func WriteCrashPlan(t testing.TB, p plan.Plan, dir string) string {
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

// HelperRun is one run of the crash helper.
type HelperRun struct {
	Cmd            *exec.Cmd
	Stdout, Stderr bytes.Buffer
	Exited         chan error // the run's exit, once it has ended
}

// StartHelper starts the crash helper bin on the plan at planPath.
func StartHelper(t testing.TB, bin, planPath string) *HelperRun {
	t.Helper()
	r := &HelperRun{Cmd: exec.Command(bin, "-plan", planPath), Exited: make(chan error, 1)}
	r.Cmd.Stdout, r.Cmd.Stderr = &r.Stdout, &r.Stderr
	if err := r.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.Exited <- r.Cmd.Wait() }()
	return r
}

// Stop lets the run drain (SIGTERM) and decodes the stats it printed into
// stats; a run that fails or prints no stats fails the test.
func (r *HelperRun) Stop(t testing.TB, stats any) {
	t.Helper()
	r.Cmd.Process.Signal(syscall.SIGTERM)
	r.Finish(t, stats)
}

// Finish waits for the run to end and decodes the stats it printed.
func (r *HelperRun) Finish(t testing.TB, stats any) {
	t.Helper()
	if err := <-r.Exited; err != nil {
		t.Fatalf("final run: %v\n%s", err, r.Stderr.String())
	}
	if err := json.Unmarshal(r.Stdout.Bytes(), stats); err != nil {
		t.Fatalf("final run stats %q: %v", r.Stdout.String(), err)
	}
}

// KillWaits draws how long each run lives before its SIGKILL: least plus
// up to spread, from a PCG seeded with (seed, stream) so that a failing
// schedule can be replayed.
func KillWaits(seed, stream uint64, least, spread time.Duration) func() time.Duration {
	rng := rand.New(rand.NewPCG(seed, stream))
	return func() time.Duration {
		return least + time.Duration(rng.IntN(int(spread/time.Millisecond)))*time.Millisecond
	}
}

// CrashSchedule is how a crash test kills the helper before its last run.
type CrashSchedule struct {
	Kills int
	Wait  func() time.Duration // see KillWaits
	// MayEnd says a run that ends by itself before its kill is only
	// logged; otherwise it fails the test (the route should still be
	// working then, e.g. a consumer that never reaches an end).
	MayEnd bool
	// Progress, when set, says what the killed runs had done so far
	// (rows written, say) for the log.
	Progress func() string
}

// KillRuns starts the crash helper bin on planPath s.Kills times and
// SIGKILLs each run after its wait.
func KillRuns(t testing.TB, bin, planPath string, s CrashSchedule) {
	t.Helper()
	for i := range s.Kills {
		r := StartHelper(t, bin, planPath)
		wait := s.Wait()
		select {
		case err := <-r.Exited:
			if !s.MayEnd {
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
		if s.Progress != nil {
			progress = " " + s.Progress()
		}
		t.Logf("run %d killed after %v%s %s", i, wait, progress, strings.TrimSpace(r.Stderr.String()))
	}
}

// CrashAndFinish runs p in the crash helper bin (its plan file in dir),
// SIGKILLs it at kills moments drawn from seed (a run may end first),
// then lets a last run finish and decodes the stats it printed into
// stats.
func CrashAndFinish(t testing.TB, bin string, p plan.Plan, dir string, seed uint64, kills int, stats any) {
	t.Helper()
	planPath := WriteCrashPlan(t, p, dir)
	KillRuns(t, bin, planPath, CrashSchedule{Kills: kills, Wait: KillWaits(seed, 5, 50*time.Millisecond, 450*time.Millisecond), MayEnd: true})
	StartHelper(t, bin, planPath).Finish(t, stats)
}

// WaitFor polls done every interval until it holds or timeout has passed,
// and says whether it held.
func WaitFor(done func() bool, timeout, every time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}

// Rows is what ScanPairs and PGQuery's scan read: what *sql.Rows and
// pgx.Rows have in common.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ScanPairs reads (key, value) rows into a map, failing on a key seen
// twice.
func ScanPairs[V any](t testing.TB, rows Rows) map[string]V {
	t.Helper()
	out := map[string]V{}
	for rows.Next() {
		var k string
		var v V
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[k]; dup {
			t.Errorf("id %s stored twice", k)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
