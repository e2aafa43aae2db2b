package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
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
	"sync/atomic"
	"syscall"
	"time"
)

// buildMqbc compiles cmd/mqbc into dir once; moduleRoot is the repository.
func buildMqbc(moduleRoot, dir string) (string, error) {
	bin := filepath.Join(dir, "mqbc")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/mqbc")
	cmd.Dir = moduleRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/mqbc: %v\n%s", err, out)
	}
	return bin, nil
}

// moduleRoot finds the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Verdict is one route's verdict as `mqbc build --format json` prints it.
type Verdict struct {
	Name      string   `json:"name"`
	Guarantee string   `json:"guarantee"`
	Reasons   []string `json:"reasons"`
}

// prepare makes a fresh directory holding the case's files (with source as
// the pipeline) and the tables its setup creates.
func prepare(tmp string, c *Case, source string) (string, error) {
	dir, err := os.MkdirTemp(tmp, "run")
	if err != nil {
		return "", err
	}
	source, err = openServerDBs(dir, source, c.Setup)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "routes.mqb"), []byte(source), 0o644); err != nil {
		return "", err
	}
	input := c.Input
	if c.follows() && c.feeds() {
		input = "" // fed in chunks while the routes run
	}
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(input), 0o644); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
		return "", err
	}
	for _, s := range c.Setup {
		if isServerPlaceholder(s.DB) {
			continue // run by openServerDBs
		}
		h, err := sql.Open("sqlite3", filepath.Join(dir, s.DB))
		if err != nil {
			return "", err
		}
		_, err = h.Exec(s.SQL)
		h.Close()
		if err != nil {
			return "", fmt.Errorf("setup %s: %s: %w", s.DB, s.SQL, err)
		}
	}
	return dir, nil
}

// build asks the compiler for the verdicts of dir/routes.mqb. On a
// rejected file it returns the diagnostics as the error.
func (ck *Checker) build(dir string) ([]Verdict, error) {
	cmd := exec.Command(ck.Mqbc, "build", "--format", "json", "routes.mqb")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var diags []struct {
			Severity any    `json:"severity"`
			Code     string `json:"code"`
			Summary  string `json:"summary"`
		}
		var errs []string
		if json.Unmarshal(stderr.Bytes(), &diags) == nil {
			for _, d := range diags {
				if strings.HasPrefix(d.Code, "E") {
					errs = append(errs, d.Code+": "+d.Summary)
				}
			}
		}
		if len(errs) == 0 {
			errs = []string{stderr.String()}
		}
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	var vs []Verdict
	if err := json.Unmarshal(stdout.Bytes(), &vs); err != nil {
		return nil, fmt.Errorf("mqbc build --format json: %v\n%s", err, stdout.String())
	}
	return vs, nil
}

// runResult is how one `mqbc run` ended.
type runResult struct {
	killed   bool // by our SIGKILL
	termed   bool // sent our SIGTERM (killAt.Term) while it ran
	exitCode int
	dur      time.Duration
	// work is how long the routes ran: from the first "route started"
	// log line to the end (0 if none started).
	work   time.Duration
	stderr string
	// stalled: the drain gave up before the routes had consumed what was
	// fed (a Kafka group that never got its partitions back): what the
	// sinks hold is not the run's outcome.
	stalled bool
	// left says what the source still held when a stalled run ended
	// (judgeLeft); empty when it was not counted.
	left string
	// unfed says why the harness could not hand the source all of its
	// input (a broker write that failed under load): the killed run then
	// read less than the clean one, which says nothing about the verdict.
	unfed string
	// stuck: the run did not end within the checker's timeout and was
	// stopped; stacks is what it printed on the SIGQUIT sent first (every
	// goroutine's stack; empty if it did not answer).
	stuck  bool
	stacks string
	// cpu is the CPU time the stuck run used; paused how long of its
	// time the harness itself did not run (harnessPauses): a machine that
	// stalled everything, not a hang of mqbc.
	cpu, paused time.Duration
}

func (r runResult) String() string {
	switch {
	case r.unfed != "":
		return fmt.Sprintf("input not fully fed (%s)", r.unfed)
	case r.stalled && r.left != "":
		return fmt.Sprintf("stalled (had not consumed all input when stopped after %v: %s)", r.dur.Round(time.Millisecond), r.left)
	case r.stalled:
		return fmt.Sprintf("stalled (had not consumed all input when stopped after %v)", r.dur.Round(time.Millisecond))
	case r.stuck:
		logged := "it logged nothing"
		if t := strings.TrimSpace(r.stderr); t != "" {
			logged = "its last log line: " + tail(t[strings.LastIndexByte(t, '\n')+1:], 300)
		}
		machine := ""
		if r.paused > 0 {
			machine = fmt.Sprintf("; the harness itself did not run for %v of that time, so the machine stalled, not only mqbc", r.paused.Round(time.Millisecond))
		}
		return fmt.Sprintf("stuck: no exit after %v, stopped (%s; it used %v of CPU%s)", r.dur.Round(time.Millisecond), logged, r.cpu.Round(time.Millisecond), machine)
	case r.killed:
		return fmt.Sprintf("killed after %v", r.dur.Round(time.Millisecond))
	case r.exitCode == 0:
		return fmt.Sprintf("exit 0 after %v", r.dur.Round(time.Millisecond))
	}
	return fmt.Sprintf("exit %d after %v: %s", r.exitCode, r.dur.Round(time.Millisecond), tail(r.stderr, 400))
}

// killAt says when to SIGKILL a run: after After from the process start,
// or, with Started, after After from its first "route started". With
// Term the run gets SIGTERM instead, which drains it, and with ThenKill
// > 0 a SIGKILL that long after the SIGTERM (a crash during the drain).
type killAt struct {
	After    time.Duration
	Started  bool
	Term     bool
	ThenKill time.Duration
}

func (k killAt) String() string {
	what := ""
	if k.Term {
		what = "SIGTERM "
		if k.ThenKill > 0 {
			what = fmt.Sprintf("SIGTERM (SIGKILL %v later) ", k.ThenKill.Round(time.Millisecond))
		}
	}
	if k.Started {
		return fmt.Sprintf("%s%v after route start", what, k.After.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s%v after process start", what, k.After.Round(time.Millisecond))
}

// drawStop makes at a SIGTERM for pct percent of draws of rng, a third of
// them cut by a SIGKILL within 150 ms. rng is a stream of its own, so a
// seed's SIGKILL instants are the same with stops or without.
func drawStop(at *killAt, rng *rand.Rand, pct int) {
	if pct <= 0 || rng.IntN(100) >= pct {
		return
	}
	at.Term = true
	if rng.IntN(3) == 0 {
		at.ThenKill = time.Millisecond + time.Duration(rng.Int64N(int64(150*time.Millisecond)))
	}
}

var routeStarted = []byte(`"msg":"route started"`)

// proc is a running mqbc: started is closed at its first "route started",
// done when it has ended (res is then set).
type proc struct {
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	begin   time.Time
	started chan struct{}
	done    chan struct{}
	killed  atomic.Bool
	res     runResult
	at      time.Time // when started closed
	// quit is set when the run was found stuck and sent SIGQUIT.
	quit atomic.Bool
	// termed is set when the run was sent SIGTERM (killAt.Term).
	termed atomic.Bool
}

// start runs mqbc on dir/routes.mqb, SIGKILLing it at kill (nil: never).
// A run that has not ended after the checker's timeout is stuck: it gets
// SIGQUIT, on which a Go program prints every goroutine's stack to stderr
// and exits, then SIGKILL after stuckGrace if it is still there. The
// stacks are kept in the run's result (stacks) and the run is listed in
// ck.stuck.
func (ck *Checker) start(dir string, kill *killAt) *proc {
	timeout := ck.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	p := &proc{cancel: cancel, started: make(chan struct{}), done: make(chan struct{})}
	args := []string{"run", "--log-level", "info", "--log-format", "json", "--progress", "off"}
	var logLine func([]byte)
	if h := ck.srcs[dir]; h != nil {
		args, logLine = append(args, h.args...), h.logLine
	}
	p.cmd = exec.CommandContext(ctx, ck.Mqbc, append(args, "routes.mqb")...)
	p.cmd.Cancel = func() error {
		p.quit.Store(true)
		return p.cmd.Process.Signal(syscall.SIGQUIT)
	}
	p.cmd.WaitDelay = stuckGrace // then SIGKILL
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), ck.envOf(dir)...)
	p.cmd.Stdout = io.Discard
	fail := func(err error) *proc {
		p.res = runResult{exitCode: -1, stderr: err.Error()}
		close(p.done)
		cancel()
		return p
	}
	pr, err := p.cmd.StderrPipe()
	if err != nil {
		return fail(err)
	}
	pauses := harnessPauses()
	p.begin = time.Now()
	if err := p.cmd.Start(); err != nil {
		return fail(err)
	}
	var timer *time.Timer
	var timerMu sync.Mutex
	arm := func() {
		timerMu.Lock()
		timer = time.AfterFunc(kill.After, func() { p.interrupt(kill) })
		timerMu.Unlock()
	}
	if kill != nil && !kill.Started {
		arm()
	}
	go func() {
		defer cancel()
		var stderr, stacks bytes.Buffer
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if stacks.Len() > 0 || p.quit.Load() && bytes.HasPrefix(line, sigquitLine) {
				// The Go runtime's answer to our SIGQUIT: kept apart, so
				// that neither the log's cap nor its tail hides it.
				if stacks.Len() < maxStacks {
					stacks.Write(line)
					stacks.WriteByte('\n')
				}
				continue
			}
			if p.at.IsZero() && bytes.Contains(line, routeStarted) {
				p.at = time.Now()
				close(p.started)
				if kill != nil && kill.Started {
					arm()
				}
			}
			if logLine != nil {
				logLine(line)
			}
			if stderr.Len() < 1<<20 {
				stderr.Write(line)
				stderr.WriteByte('\n')
			}
		}
		err := p.cmd.Wait()
		timerMu.Lock()
		if timer != nil {
			timer.Stop()
		}
		timerMu.Unlock()
		res := runResult{dur: time.Since(p.begin), stderr: stderr.String(), termed: p.termed.Load()}
		if !p.at.IsZero() {
			res.work = time.Since(p.at)
		}
		var ee *exec.ExitError
		switch {
		case err == nil:
		case ctx.Err() != nil && !p.killed.Load():
			res.exitCode, res.stuck, res.stacks = -1, true, stacks.String()
			if ps := p.cmd.ProcessState; ps != nil {
				res.cpu = ps.UserTime() + ps.SystemTime()
			}
			res.paused = pauses.during(p.begin, time.Now())
			ck.noteStuck(dir, kill, res)
		case errors.As(err, &ee):
			ws, ok := ee.Sys().(syscall.WaitStatus)
			switch {
			case ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL && p.killed.Load():
				res.killed = true
			case ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM && p.termed.Load():
				// Our SIGTERM came before mqbc took the signal over (the
				// Go runtime's and the libraries' start-up): it died of
				// it, as of a SIGKILL.
				res.killed = true
			default:
				res.exitCode = ee.ExitCode()
			}
		default:
			res.exitCode = -1
			res.stderr += "\n" + err.Error()
		}
		p.res = res
		close(p.done)
	}()
	return p
}

func (p *proc) kill() {
	p.killed.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
}

// interrupt sends the run what at says: SIGKILL, or SIGTERM and perhaps a
// SIGKILL after it. Signal does nothing once the process is waited for.
func (p *proc) interrupt(at *killAt) {
	if !at.Term {
		p.kill()
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	p.termed.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if at.ThenKill > 0 {
		time.AfterFunc(at.ThenKill, func() {
			select {
			case <-p.done:
			default:
				p.kill()
			}
		})
	}
}

func (p *proc) wait() runResult {
	<-p.done
	return p.res
}

// waitStarted waits until the routes started or the process ended; false
// if it ended first.
func (p *proc) waitStarted() bool {
	select {
	case <-p.started:
		return true
	case <-p.done:
		return false
	}
}

// run runs mqbc to its end (or its kill).
func (ck *Checker) run(dir string, kill *killAt) runResult {
	return ck.start(dir, kill).wait()
}

// killedRuns runs dir's pipeline until kills SIGKILLs landed (or 3×kills
// attempts), at seeded random instants: the first and about a third of the
// others within the first 350 ms of the process (before or while its
// routes start), the rest within the time a clean run's routes worked,
// counted from their start. With ck.Stops some of them are SIGTERMs
// instead (drawStop); one lands when it interrupts the run: the run exits
// 3 (its finite source not read to the end) or the SIGKILL after it
// lands. Then a last run goes to completion.
func (ck *Checker) killedRuns(dir string, seed uint64, kills int, clean runResult) (landed, stops int, runs []runResult, final runResult) {
	rng := rand.New(rand.NewPCG(seed, 0xdead))
	stopRng := rand.New(rand.NewPCG(seed, 0x5709))
	window := max(clean.work, 20*time.Millisecond)
	for attempt := 0; landed < kills && attempt < 3*kills; attempt++ {
		var at killAt
		if attempt == 0 || rng.IntN(3) == 0 {
			at = killAt{After: time.Duration(rng.Int64N(int64(350 * time.Millisecond)))}
		} else {
			at = killAt{After: time.Duration(rng.Int64N(int64(window))), Started: true}
		}
		at.After = max(at.After, time.Millisecond)
		drawStop(&at, stopRng, ck.Stops)
		r := ck.run(dir, &at)
		runs = append(runs, r)
		ck.noteFailedDrain(at, r)
		switch {
		case r.termed && (r.killed || r.exitCode == exitInterrupted):
			landed++
			stops++
		case r.killed:
			landed++
		}
	}
	final = ck.run(dir, nil)
	return landed, stops, runs, final
}

// noteFailedDrain logs a run that SIGTERM was to drain and that failed
// instead: not a verdict's breach by itself (the final run's outcome is
// compared), but worth a look.
func (ck *Checker) noteFailedDrain(at killAt, r runResult) {
	if r.termed && !r.killed && r.exitCode != 0 && r.exitCode != exitInterrupted {
		ck.logf("  a run sent %v did not drain: %v\n", at, r)
		ck.failedDrains = append(ck.failedDrains, fmt.Sprintf("sent %v: %v", at, r))
	}
}

// exitInterrupted is mqbc run's exit code when SIGTERM drained a run
// whose finite source was not read to the end, or stopped it while its
// routes started.
const exitInterrupted = 3

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
