package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// hangEnv makes this test binary, started by a test as if it were mqbc,
// log a line and hang (see hangForever) instead of running tests.
const hangEnv = "SOUNDNESS_TEST_HANG"

func init() {
	switch os.Getenv(hangEnv) {
	case "":
	case "deaf":
		// A process that does not answer SIGQUIT.
		signal.Ignore(syscall.SIGQUIT)
		hangForever()
	default:
		hangForever()
	}
}

// hangForever is a process that never ends: one goroutine waits on a lock
// it holds, three identical ones on a channel nobody sends on, as a route
// whose start waits on a lock or a reply would.
func hangForever() {
	fmt.Fprintln(os.Stderr, `{"level":"INFO","msg":"opening the stores"}`)
	never := make(chan struct{})
	for range 3 {
		go waitForReply(never)
	}
	var mu sync.Mutex
	mu.Lock()
	lockTwice(&mu)
}

func waitForReply(c chan struct{}) { <-c }

func lockTwice(mu *sync.Mutex) { mu.Lock() }

// stuckChecker is a checker whose "mqbc" is this test binary told to hang,
// with a timeout of 1 s.
func stuckChecker(t *testing.T) (*Checker, string) {
	t.Helper()
	if os.Getenv(hangEnv) == "" {
		t.Setenv(hangEnv, "1")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "routes.mqb"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &Checker{Mqbc: self, Tmp: t.TempDir(), Timeout: time.Second}, dir
}

// A run that does not end in time gets SIGQUIT before it is killed, and
// the goroutine stacks the Go runtime prints on it are kept, apart from
// the log, and summarised with mqb's own goroutines first.
func TestStuckRunKeepsItsStacks(t *testing.T) {
	ck, dir := stuckChecker(t)
	ck.nameDir(dir, "clean run")
	start := time.Now()
	r := ck.run(dir, nil)
	if took := time.Since(start); took > ck.Timeout+stuckGrace {
		t.Errorf("the stuck run took %v to stop, want under %v: it did not exit on SIGQUIT", took, ck.Timeout+stuckGrace)
	}
	if !r.stuck || r.exitCode != -1 || r.killed {
		t.Fatalf("a run that hangs: stuck %v, exit %d, killed %v; want stuck, exit -1, not killed by a kill we planned (%v)", r.stuck, r.exitCode, r.killed, r)
	}
	if !strings.HasPrefix(r.stacks, "SIGQUIT: quit\n") || !strings.Contains(r.stacks, ".lockTwice(") {
		t.Fatalf("the stacks kept are not the SIGQUIT dump with the hanging function:\n%s", tail(r.stacks, 2000))
	}
	if !strings.Contains(r.stderr, "opening the stores") || strings.Contains(r.stderr, "goroutine ") {
		t.Errorf("the log should hold what the run logged and nothing of the dump:\n%s", tail(r.stderr, 2000))
	}
	if s := r.String(); !strings.Contains(s, "stuck") || !strings.Contains(s, "opening the stores") || !strings.Contains(s, " of CPU") {
		t.Errorf("the run says %q: want it stuck, with its last log line and the CPU it used", s)
	}
	if r.cpu >= ck.Timeout {
		t.Errorf("a run that waited on a lock used %v of CPU, more than it ran", r.cpu)
	}

	t.Logf("%v", r)
	sum := goroutineSummary(r.stacks, stuckReportCap)
	t.Logf("%s", sum)
	lock, reply := strings.Index(sum, ".lockTwice\n"), strings.Index(sum, ".waitForReply\n")
	if lock < 0 || reply < 0 {
		t.Fatalf("the summary lacks the hanging goroutines:\n%s", sum)
	}
	if strings.Contains(sum, "runtime.gcBgMarkWorker") || strings.Contains(sum, "runtime.bgsweep") || strings.Contains(sum, " fp=") {
		t.Errorf("the summary keeps the runtime's own goroutines or frame addresses:\n%s", sum)
	}
	if !strings.Contains(sum, "[chan receive] and 2 more like it:") {
		t.Errorf("the three goroutines waiting on one channel are not one group of three:\n%s", sum)
	}
	if first := strings.Index(sum, "\ngoroutine "); first < 0 || first > min(lock, reply) {
		t.Errorf("a goroutine of the runtime comes before mqb's own:\n%s", sum)
	}

	stuck := ck.takeStuck()
	if len(stuck) != 1 || stuck[0].Which != "clean run (to its end)" {
		t.Fatalf("the checker noted %d stuck runs %v, want the clean run", len(stuck), stuck)
	}
	res := &Result{Case: &Case{Name: "stuck", Source: "route r {}\n"}, Stuck: stuck}
	rep := report(res)
	if !strings.Contains(rep, "STUCK: the clean run (to its end) did not end") || !strings.Contains(rep, ".lockTwice\n") {
		t.Errorf("the report does not show the stuck run with its stacks:\n%s", rep)
	}
	if l := summaryLine(res); !strings.Contains(l, "STUCK: clean run") {
		t.Errorf("the summary line %q does not say a run was stuck", l)
	}
	var tally Tally
	tally.Add(res)
	if l := tally.Line(); !strings.Contains(l, "stuck runs (stopped with their stacks): 1 (stuck)") {
		t.Errorf("the tally line %q does not count the stuck run", l)
	}
}

// A killed run whose kill was to come after "route started", which never
// comes, is stuck as well, and named with the kill it waited for.
func TestStuckKilledRunKeepsItsStacks(t *testing.T) {
	ck, dir := stuckChecker(t)
	ck.nameDir(dir, "run of the killed runs' directory")
	r := ck.run(dir, &killAt{After: time.Millisecond, Started: true})
	if !r.stuck || !strings.Contains(r.stacks, ".lockTwice(") {
		t.Fatalf("a killed run that hangs before its routes start: stuck %v, stacks:\n%s", r.stuck, tail(r.stacks, 2000))
	}
	stuck := ck.takeStuck()
	if len(stuck) != 1 || !strings.Contains(stuck[0].Which, "to be killed 1ms after route start") {
		t.Fatalf("the checker noted %v, want the killed run with its kill", stuck)
	}
}

// A stuck run that does not answer SIGQUIT is killed stuckGrace later,
// and says it printed no stacks.
func TestStuckRunDeafToSIGQUITIsKilled(t *testing.T) {
	t.Setenv(hangEnv, "deaf")
	ck, dir := stuckChecker(t)
	start := time.Now()
	r := ck.run(dir, nil)
	if took := time.Since(start); took > ck.Timeout+stuckGrace+5*time.Second {
		t.Errorf("a run deaf to SIGQUIT was stopped after %v, want about %v", took, ck.Timeout+stuckGrace)
	}
	if !r.stuck || r.stacks != "" {
		t.Fatalf("a run deaf to SIGQUIT: stuck %v, stacks %q", r.stuck, tail(r.stacks, 500))
	}
	if rep := stuckReport(ck.takeStuck()); !strings.Contains(rep, "it printed no stacks on SIGQUIT") {
		t.Errorf("the report of a run deaf to SIGQUIT:\n%s", rep)
	}
}

// The harness notes the times it did not run itself (a machine that
// stalled everything), and a stuck run says how much of its time was one.
func TestHarnessPauses(t *testing.T) {
	w := &pauseWatch{}
	t0 := time.Now()
	w.note(t0, t0.Add(pauseTick+pauseMin/2)) // late, but not a pause
	w.note(t0.Add(time.Second), t0.Add(time.Second+pauseTick+10*time.Second))
	from := t0.Add(time.Second + pauseTick) // when the late wake-up was due
	for _, c := range []struct {
		from, to time.Time
		want     time.Duration
	}{
		{t0, t0.Add(time.Minute), 10 * time.Second},
		{from.Add(4 * time.Second), from.Add(6 * time.Second), 2 * time.Second},
		{t0, from.Add(3 * time.Second), 3 * time.Second},
		{from.Add(10 * time.Second), t0.Add(time.Minute), 0},
		{t0, from, 0},
	} {
		if got := w.during(c.from, c.to); got != c.want {
			t.Errorf("pauses between %v and %v after the start: %v, want %v", c.from.Sub(t0), c.to.Sub(t0), got, c.want)
		}
	}
	r := runResult{exitCode: -1, stuck: true, dur: time.Minute, paused: 10 * time.Second}
	if s := r.String(); !strings.Contains(s, "the harness itself did not run for 10s of that time") {
		t.Errorf("a stuck run during a pause of the harness says %q", s)
	}
}
