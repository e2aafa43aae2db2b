package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A file source in group_subscribe or subscribe mode never ends: it follows
// the file. Its input arrives in chunks appended while the routes run (and,
// in the killed run, while they are down too); a run ends with SIGTERM once
// its sinks have stopped changing.

func (c *Case) follows() bool {
	// An s3:// prefix is filled before the first run, and its routes end
	// at the end of the listing.
	return c.Mode == "group_subscribe" || c.Mode == "subscribe" || (c.Broker != "" && c.Broker != brokerS3)
}

// feeds: the input is fed in chunks (to the file, a Kafka topic, a
// PostgreSQL table, a core NATS subject); a JetStream stream is filled
// before the first run.
func (c *Case) feeds() bool { return c.Broker != brokerNATS && c.Broker != brokerS3 }

const openGrace = 300 * time.Millisecond

// chunks splits the input into n pieces at line boundaries.
func chunks(input string, n int) []string {
	lines := strings.SplitAfter(input, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var out []string
	per := max(1, (len(lines)+n-1)/n)
	for i := 0; i < len(lines); i += per {
		out = append(out, strings.Join(lines[i:min(i+per, len(lines))], ""))
	}
	return out
}

func appendInput(dir, data string) error {
	f, err := os.OpenFile(filepath.Join(dir, "in.jsonl"), os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// drain waits until the routes' sinks stop changing (1 s without a change,
// longer where the source says less: quietPolls) and, where the source can tell, until the routes have consumed what was
// fed (srcHandle.caughtUp), 45 s at most; then it stops the process with
// SIGTERM, waits for it, and asks the source what it still holds
// (srcHandle.left, judgeLeft).
func (ck *Checker) drain(dir string, routes []RouteShape, p *proc) runResult {
	// A broker redelivers what a killed run left unacked after ack_wait (1 s).
	var last map[string]Snapshot
	still, quiet := 0, max(ck.quietPolls, 4)
	var caughtUp func() bool
	if h := ck.srcs[dir]; h != nil {
		caughtUp = h.caughtUp
	}
	if caughtUp == nil && ck.serverDedup {
		quiet = max(quiet, 32) // 8 s: past a dead run's reservations (serverDedupRE)
	}
	deadline := time.Now().Add(45 * time.Second)
	for (still < quiet || (caughtUp != nil && !caughtUp())) && time.Now().Before(deadline) {
		select {
		case <-p.done:
			return p.wait()
		case <-time.After(250 * time.Millisecond):
		}
		cur, err := snapshots(dir, routes)
		if err != nil {
			still = 0
			continue
		}
		if last != nil && sameSnapshots(last, cur) {
			still++
		} else {
			still = 0
		}
		last = cur
	}
	stalled := caughtUp != nil && !caughtUp()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	r := p.wait()
	r.stalled = stalled
	if h := ck.srcs[dir]; h != nil && h.left != nil {
		r = judgeLeft(r, h.left)
	}
	return r
}

// judgeLeft marks a drained run stalled when its source still holds
// records for the routes (or cannot say how many): the sinks then lack
// them because the run stopped before reading them, which is neither a
// loss nor a verdict's breach, and the case is inconclusive.
func judgeLeft(r runResult, left func() (int, error)) runResult {
	n, err := left()
	switch {
	case err != nil:
		r.stalled, r.left = true, fmt.Sprintf("could not count what the source still holds: %v", err)
	case n > 0:
		r.stalled, r.left = true, fmt.Sprintf("%d records still in the source", n)
	}
	return r
}

func sameSnapshots(a, b map[string]Snapshot) bool {
	for name, s := range a {
		if _, d := (exactPromise{}).judge(s, b[name]); d != "" {
			return false
		}
	}
	return len(a) == len(b)
}

// followClean appends every chunk while the routes run, then drains.
func (ck *Checker) followClean(dir string, c *Case) runResult {
	p := ck.start(dir, nil)
	if !p.waitStarted() {
		return p.wait()
	}
	// "route started" comes before the source has opened the file; a
	// subscribe source skips what is already there when it does.
	time.Sleep(openGrace)
	ck.waitReady(dir, p)
	var pending []string
	if c.feeds() {
		pending = chunks(c.Input, 2*c.Kills+2)
	}
	for _, ch := range pending {
		if err := ck.feed(dir, ch); err != nil {
			p.kill()
			r := p.wait()
			r.exitCode, r.stderr, r.unfed = -1, err.Error(), err.Error()
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ck.drain(dir, c.Routes, p)
}

// followKilled feeds the chunks across runs that are SIGKILLed at seeded
// instants: before each run one chunk is appended while nothing runs, and
// one more once its routes started. The last run gets what is left and is
// drained.
func (ck *Checker) followKilled(dir string, c *Case, clean runResult) (landed, stops int, final runResult) {
	rng := rand.New(rand.NewPCG(c.Seed, 0xdead))
	stopRng := rand.New(rand.NewPCG(c.Seed, 0x5709))
	window := max(clean.work/2, 20*time.Millisecond)
	var pending []string
	if c.feeds() {
		pending = chunks(c.Input, 2*c.Kills+2)
	}
	var unfed error
	feed := func() {
		if len(pending) > 0 {
			if err := ck.feed(dir, pending[0]); err != nil && unfed == nil {
				unfed = err
			}
			pending = pending[1:]
		}
	}
	for attempt := 0; landed < c.Kills && attempt < 3*c.Kills; attempt++ {
		feed()
		var at killAt
		if attempt == 0 || rng.IntN(3) == 0 {
			at = killAt{After: time.Duration(rng.Int64N(int64(350 * time.Millisecond)))}
		} else {
			at = killAt{After: time.Duration(rng.Int64N(int64(window))), Started: true}
		}
		at.After = max(at.After, time.Millisecond)
		drawStop(&at, stopRng, ck.Stops)
		p := ck.start(dir, &at)
		if p.waitStarted() {
			ck.waitReady(dir, p)
			feed()
		}
		r := p.wait()
		ck.noteFailedDrain(at, r)
		switch {
		case r.termed && (r.killed || r.exitCode == 0 || r.exitCode == exitInterrupted):
			// A followed source never ends: a drained run exits 0.
			landed++
			stops++
		case r.killed:
			landed++
		}
	}
	p := ck.start(dir, nil)
	if !p.waitStarted() {
		return landed, stops, p.wait()
	}
	time.Sleep(openGrace)
	ck.waitReady(dir, p)
	for len(pending) > 0 {
		feed()
		time.Sleep(20 * time.Millisecond)
	}
	final = ck.drain(dir, c.Routes, p)
	if unfed != nil {
		// A write to the broker failed part-way (under load, a partition's
		// produce timed out): the topic holds less than the clean run's.
		final.unfed = unfed.Error()
	}
	return landed, stops, final
}
