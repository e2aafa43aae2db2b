package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// A run that does not end within the checker's timeout is stuck: a hang
// in mqbc (or in what it waits for) that no verdict explains. Seed 25097
// once saw a clean run that logged nothing for a minute, and its reruns
// never did it again, so all that was left was "no exit within 1m0s". A
// stuck run now gets SIGQUIT before it is killed: the Go runtime then
// prints every goroutine's stack, which says where it waited.

// stuckGrace is how long a stuck run has, after SIGQUIT, to print its
// stacks and exit before it is SIGKILLed.
const stuckGrace = 5 * time.Second

// maxStacks caps the stacks kept of one run (a dump of a few hundred
// goroutines is well under it).
const maxStacks = 4 << 20

// stuckReportCap caps the summary of one stuck run's stacks in a report.
const stuckReportCap = 24 << 10

// sigquitLine is the first line the Go runtime prints on SIGQUIT.
var sigquitLine = []byte("SIGQUIT: quit")

// A stuck run that logged nothing may be no hang of mqbc at all: when the
// whole machine stalls (the host does not schedule it), the harness's
// clock still runs, and its timeout stops a run that never got the CPU to
// log. The harness watches itself to tell the two apart: a goroutine that
// wakes every pauseTick notes each wake-up that came more than pauseMin
// late, and a stuck run says how much of its time the harness was paused.
const (
	pauseTick = 100 * time.Millisecond
	pauseMin  = 3 * time.Second
)

// pause is a time the harness did not run.
type pause struct {
	from time.Time
	d    time.Duration
}

type pauseWatch struct {
	mu     sync.Mutex
	pauses []pause // the last maxPauses
}

const maxPauses = 1000

// harnessPauses starts the watch at its first call.
var harnessPauses = sync.OnceValue(func() *pauseWatch {
	w := &pauseWatch{}
	go func() {
		last := time.Now()
		for {
			time.Sleep(pauseTick)
			now := time.Now()
			w.note(last, now)
			last = now
		}
	}()
	return w
})

// note records a pause when the wake-up at now after the one at last came
// more than pauseMin late.
func (w *pauseWatch) note(last, now time.Time) {
	late := now.Sub(last) - pauseTick
	if late <= pauseMin {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pauses) == maxPauses {
		w.pauses = slices.Delete(w.pauses, 0, 1)
	}
	w.pauses = append(w.pauses, pause{from: last.Add(pauseTick), d: late})
}

// during sums the pauses, or their parts, between from and to.
func (w *pauseWatch) during(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var sum time.Duration
	for _, p := range w.pauses {
		start, end := p.from, p.from.Add(p.d)
		if start.Before(from) {
			start = from
		}
		if end.After(to) {
			end = to
		}
		if end.After(start) {
			sum += end.Sub(start)
		}
	}
	return sum
}

// StuckRun is a run the checker stopped for not ending in time.
type StuckRun struct {
	// Which names the run ("clean run", "killed run (kill at 12ms after
	// process start)", …).
	Which string
	Run   runResult
}

// nameDir says what the runs in dir are, for the runs found stuck there.
func (ck *Checker) nameDir(dir, what string) {
	ck.stuckMu.Lock()
	defer ck.stuckMu.Unlock()
	if ck.dirNames == nil {
		ck.dirNames = map[string]string{}
	}
	ck.dirNames[dir] = what
}

// noteStuck records a stuck run of dir, killed at kill (nil: a run to its
// end).
func (ck *Checker) noteStuck(dir string, kill *killAt, r runResult) {
	ck.stuckMu.Lock()
	defer ck.stuckMu.Unlock()
	which := ck.dirNames[dir]
	if which == "" {
		which = "run in " + dir
	}
	if kill != nil {
		which += fmt.Sprintf(" (to be killed %v)", kill)
	} else {
		which += " (to its end)"
	}
	ck.stuck = append(ck.stuck, StuckRun{Which: which, Run: r})
}

// takeStuck returns the stuck runs noted since the last call.
func (ck *Checker) takeStuck() []StuckRun {
	ck.stuckMu.Lock()
	defer ck.stuckMu.Unlock()
	out := ck.stuck
	ck.stuck, ck.dirNames = nil, nil
	return out
}

// stuckReport says, for a person, which runs were stuck and where their
// goroutines waited.
func stuckReport(runs []StuckRun) string {
	var b strings.Builder
	for _, s := range runs {
		fmt.Fprintf(&b, "\nSTUCK: the %s did not end and was stopped: %v\n", s.Which, s.Run)
		if s.Run.stacks == "" {
			fmt.Fprintf(&b, "  (it printed no stacks on SIGQUIT within %v: it did not answer the signal)\n", stuckGrace)
			continue
		}
		b.WriteString(indent(goroutineSummary(s.Run.stacks, stuckReportCap)))
		b.WriteByte('\n')
	}
	return b.String()
}

// Who a goroutine belongs to, in the order a summary lists them.
const (
	ownGoroutine     = iota // has a frame of mqb's own code
	libraryGoroutine        // in a library or the standard library
	runtimeGoroutine        // only in the Go runtime's internals
)

// ownCode prefixes the functions of mqb's own code in a stack (mqbc's
// main package is "main").
var ownCode = []string{"github.com/mqb-dev/mqb/", "main."}

// runtimeCode prefixes the functions of the Go runtime's internals.
var runtimeCode = []string{"runtime.", "runtime/", "internal/"}

// goroutine is one goroutine of a dump, or a group of identical ones.
type goroutine struct {
	id, state string
	frames    []string // "func\n\tfile:line" pairs, argument values dropped
	class     int
	more      int // other goroutines with the same state and frames
}

// goroutineSummary turns a SIGQUIT dump into something a person reads
// first: goroutines with a frame of mqb's code, then those in libraries,
// each group of identical stacks once with a count; the runtime's own
// goroutines are only counted. Argument values, frame addresses and the
// runtime's frames at either end of a stack are dropped. At most limit bytes, cut between goroutines.
func goroutineSummary(dump string, limit int) string {
	var gs []*goroutine
	var cur *goroutine
	lines := strings.Split(dump, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, "goroutine ") && strings.HasSuffix(line, ":"):
			cur = &goroutine{class: runtimeGoroutine}
			head := strings.TrimSuffix(line, ":")
			cur.id = strings.Fields(head)[1]
			if l, r := strings.LastIndex(head, "["), strings.LastIndex(head, "]"); l >= 0 && r > l {
				cur.state = head[l+1 : r]
			}
			gs = append(gs, cur)
		case line == "":
			cur = nil
		case cur != nil && !strings.HasPrefix(line, "\t"):
			fn := line
			if !strings.HasPrefix(fn, "created by ") {
				if k := strings.LastIndex(fn, "("); k > 0 {
					fn = fn[:k]
				}
			}
			where := ""
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "\t") {
				i++
				where = lines[i]
				if k := strings.Index(where, " "); k > 0 {
					where = where[:k] // drops " +0x51 fp=… sp=… pc=…"
				}
			}
			cur.frames = append(cur.frames, fn+"\n"+where)
			if cur.class != ownGoroutine && !strings.HasPrefix(fn, "created by ") {
				switch {
				case hasAnyPrefix(fn, ownCode):
					cur.class = ownGoroutine
				case !hasAnyPrefix(fn, runtimeCode):
					cur.class = libraryGoroutine
				}
			}
		}
	}
	// The runtime's frames above the first other one (gopark, chanrecv:
	// the state says as much) and below the last one (goexit) go.
	for _, g := range gs {
		if g.class == runtimeGoroutine {
			continue
		}
		inRuntime := func(f string) bool { return hasAnyPrefix(f, runtimeCode) }
		for len(g.frames) > 0 && inRuntime(g.frames[0]) {
			g.frames = g.frames[1:]
		}
		end := len(g.frames)
		if end > 0 && strings.HasPrefix(g.frames[end-1], "created by ") {
			end--
		}
		for end > 0 && inRuntime(g.frames[end-1]) {
			g.frames = slices.Delete(g.frames, end-1, end)
			end--
		}
	}
	// Identical stacks in one state are one group; the wait's length
	// ("select, 2 minutes") does not tell them apart.
	var groups []*goroutine
	runtimeOnly := 0
	for _, g := range gs {
		if g.class == runtimeGoroutine {
			runtimeOnly++
			continue
		}
		state, _, _ := strings.Cut(g.state, ",")
		i := slices.IndexFunc(groups, func(h *goroutine) bool {
			hs, _, _ := strings.Cut(h.state, ",")
			return hs == state && slices.Equal(h.frames, g.frames)
		})
		if i >= 0 {
			groups[i].more++
			continue
		}
		groups = append(groups, g)
	}
	slices.SortStableFunc(groups, func(a, b *goroutine) int { return a.class - b.class })
	var b strings.Builder
	fmt.Fprintf(&b, "goroutines when stopped: %d (%d of them in the Go runtime's internals only, left out):\n", len(gs), runtimeOnly)
	for n, g := range groups {
		var gb strings.Builder
		fmt.Fprintf(&gb, "\ngoroutine %s [%s]", g.id, g.state)
		if g.more > 0 {
			fmt.Fprintf(&gb, " and %d more like it", g.more)
		}
		gb.WriteString(":\n")
		for _, f := range g.frames {
			gb.WriteString(f)
			gb.WriteByte('\n')
		}
		if b.Len()+gb.Len() > limit {
			fmt.Fprintf(&b, "\n… %d more groups of goroutines left out\n", len(groups)-n)
			break
		}
		b.WriteString(gb.String())
	}
	if len(gs) == 0 {
		b.WriteString("(no goroutine found in what it printed:)\n" + tail(dump, 2000) + "\n")
	}
	return b.String()
}

func hasAnyPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}
