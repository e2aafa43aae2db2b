package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Checker runs cases against the real mqbc binary.
type Checker struct {
	Mqbc    string
	Tmp     string // where run directories are made (removed after each case)
	Timeout time.Duration
	Log     io.Writer // progress; nil is quiet
	Keep    bool      // keep run directories
	// Stops is the percentage of a case's interruptions that are SIGTERM
	// (a drain) instead of SIGKILL, a third of them followed by a SIGKILL
	// within 150 ms (a crash during the drain); see killedRuns.
	Stops int

	// srcs holds each run directory's source (the server it reads, how
	// to feed it); quietPolls how many unchanged 250 ms polls end a drain.
	srcs       map[string]*srcHandle
	quietPolls int
	// serverDedup: the case has a dedup store on a server (serverDedupRE).
	serverDedup bool

	// feedFault, when set, is asked before each chunk is fed to a run
	// directory; an error it returns is the feed's (a test's broker
	// failing a write).
	feedFault func(dir string) error
	// noInvariants turns the timing-proof invariants off (a test shows
	// what the checker missed without them).
	noInvariants bool

	// failedDrains lists the runs of the current case that SIGTERM was to
	// drain and that failed instead (noteFailedDrain).
	failedDrains []string

	// stuck lists the runs found stuck since Check began (stuck.go);
	// dirNames says what each run directory is, for them.
	stuckMu  sync.Mutex
	stuck    []StuckRun
	dirNames map[string]string
}

// serverDedupRE finds a dedup step whose store is on a server: a run after
// a kill finds the killed run's reservations there held by another
// instance, and waits up to their expiry (5 s) before it takes them, its
// sinks standing still that long while records are still to come
// (seed-33018, a file followed in group_subscribe mode, and seed-31028
// over Kafka were stopped there and reported short). A drain that cannot
// ask the source how far the routes got waits longer for such a case.
var serverDedupRE = regexp.MustCompile(`dedup\s*\{[^}]*store\s*=\s*"@(POSTGRES|MARIADB)@"`)

// quietPolls is how many unchanged 250 ms polls of the sinks end a drain
// of c's runs (srcHandle.caughtUp and left add what the source can tell).
func quietPolls(c *Case) int {
	switch c.Broker {
	case brokerNATS:
		// JetStream redelivers what a killed run left unacked after
		// ack_wait (1 s): the sinks may stand still that long.
		return 10
	case brokerMQTT:
		// Nothing tells the drain, while a run goes on, that its routes
		// have read all their sessions hold. MQTT has no command that
		// asks a broker what a session holds, and only one client at a
		// time has a session: one connecting with a route's client_id
		// takes the session over and the broker disconnects the route.
		// Mosquitto's $SYS topics do not tell it either:
		// $SYS/broker/store/messages/count counts the messages the whole
		// broker stores (one for a message several sessions hold) for
		// every case sharing the broker (-j), and is published every
		// sys_interval (10 s unless configured), so a 0 there may be
		// older than the last chunk fed. The sinks must so stand still
		// longer, 3 s; once the run has ended, mqttLeft counts what the
		// sessions still hold.
		return 12
	}
	return 4
}

// prepare makes a run directory for source and starts what the case's
// source needs (a broker, a database), stopped by the returned function.
func (ck *Checker) prepare(tmp string, c *Case, source string) (string, func(), error) {
	dir, err := prepare(tmp, c, source)
	if err != nil {
		return "", nil, err
	}
	// The source's start may rewrite routes.mqb (an http_server's
	// address, a mongodb url): from the prepared file, whose server
	// placeholders already name this directory's databases.
	prepared, err := os.ReadFile(filepath.Join(dir, "routes.mqb"))
	if err != nil {
		closeServerDBs(dir)
		return "", nil, err
	}
	h, err := startSource(dir, c, string(prepared))
	if err != nil {
		closeServerDBs(dir)
		return "", nil, fmt.Errorf("start the %s source for %s: %w", c.Broker, dir, err)
	}
	if ck.srcs == nil {
		ck.srcs = map[string]*srcHandle{}
	}
	ck.srcs[dir] = h
	return dir, func() { h.stop(); delete(ck.srcs, dir); closeServerDBs(dir) }, nil
}

// feed appends a chunk of the input where dir's routes read it.
func (ck *Checker) feed(dir, chunk string) error {
	if ck.feedFault != nil {
		if err := ck.feedFault(dir); err != nil {
			return err
		}
	}
	if h := ck.srcs[dir]; h != nil && h.feed != nil {
		return h.feed(chunk)
	}
	return appendInput(dir, chunk)
}

// waitReady waits (10 s at most) until what is fed to dir reaches its
// routes, or p ends.
func (ck *Checker) waitReady(dir string, p *proc) {
	h := ck.srcs[dir]
	if h == nil || h.ready == nil {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for !h.ready() && time.Now().Before(deadline) {
		select {
		case <-p.done:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (ck *Checker) envOf(dir string) []string {
	if h := ck.srcs[dir]; h != nil {
		return h.env
	}
	return nil
}

// The verdicts of the ladder, as the plan spells them.
const (
	exactlyOnce     = "exactly-once"
	effectivelyOnce = "effectively-once"
	atLeastOnce     = "at-least-once"
	atMostOnce      = "at-most-once"
)

// Finding is a verdict that the runs contradict.
type Finding struct {
	Route   string
	Verdict Verdict
	// What differed, in words, and the records that did.
	What string
	Diff string
}

// Unexplained is a difference between two clean runs of a route the
// generator calls deterministic.
type Unexplained struct {
	Route   string
	Verdict Verdict
	// Clean is how the two clean runs differ; Killed how the killed run
	// differs from the first.
	Clean, Killed string
	// Second is how the second clean run ended; Hints what kind of
	// difference the clean runs show (cleanHints).
	Second runResult
	Hints  string
}

// CleanFailure is a route whose killed run differs from its clean run
// while one of its clean runs failed (a non-zero exit, not our kill: a
// route with no dlq stopped at a record, a server error): a clean run
// that stopped early is no reference, so the comparison tests nothing
// and the route is inconclusive, with that run's error for a person.
type CleanFailure struct {
	Route string
	// Which names the run that failed ("first clean run", …); Run is how
	// it ended, its stderr's tail included.
	Which string
	Run   runResult
}

// cleanDiffOutcome is what a route whose two clean runs differ makes of
// its killed run's difference (judgeCleanDiff).
type cleanDiffOutcome int

const (
	// diffUnexplained: both clean runs ended well and the killed run
	// keeps what timing cannot change (Result.Unexplained).
	diffUnexplained cleanDiffOutcome = iota
	// diffFalse: both clean runs ended well and agree on what the killed
	// run breaks (a Finding).
	diffFalse
	// diffCleanFailed: a clean run failed; inconclusive (CleanFailure).
	diffCleanFailed
)

// cleanNoKill is the CleanFailure.Which of a case whose clean run failed
// before it wrote anything.
const cleanNoKill = "clean run, before it wrote anything,"

// wroteNothing reports whether the routes' snapshots hold no record.
func wroteNothing(snaps map[string]Snapshot) bool {
	for _, s := range snaps {
		for _, m := range s.Full {
			if len(m) > 0 {
				return false
			}
		}
	}
	return true
}

// judgeCleanDiff classifies the difference of a route whose two clean
// runs, first and second, differ from each other. A clean run that
// failed makes the route inconclusive, and failed is that run (nil
// otherwise); else broken, what the killed run breaks of what timing
// cannot change (invariants), makes it a false verdict, and nothing
// broken leaves it unexplained. Two clean runs that both failed stopped
// each where it happened to be, so even what they agree on is no
// reference for a killed run that went further.
func judgeCleanDiff(first, second runResult, broken func() string) (outcome cleanDiffOutcome, failed *runResult) {
	switch {
	case first.exitCode != 0:
		return diffCleanFailed, &first
	case second.exitCode != 0:
		return diffCleanFailed, &second
	case broken() != "":
		return diffFalse, nil
	}
	return diffUnexplained, nil
}

// Result is the outcome of one case.
type Result struct {
	Case     *Case
	Verdicts []Verdict
	// Rejected holds the diagnostics when mqbc build refused the file.
	Rejected string
	Findings []Finding
	// Inconclusive lists routes whose runs differed but whose two clean
	// runs differed as well on a route that decides by the clock (Timed),
	// or whose runs both failed: their outcome depends on timing; and the
	// routes of CleanFailed.
	Inconclusive []string
	// CleanFailed lists the routes whose runs differed while a clean run
	// of theirs failed: inconclusive, never a false verdict, but reported
	// with the failed run's error so that it is not hidden.
	CleanFailed []CleanFailure
	// Unexplained lists routes the generator calls deterministic (not
	// Timed) whose two clean runs differed, while the killed run broke
	// nothing timing cannot change (see invariants): either the
	// generator's model misses a per-delivery value or an order-dependent
	// table, or the route's identity depends on the delivery, which an
	// effectively-once verdict must not allow. Each is reported and
	// written as a case, like a finding.
	Unexplained []Unexplained
	// Explained lists routes whose killed run differs from the clean run
	// only in a way the verdict allows, with why (explainDLQ): shown,
	// never a false verdict.
	Explained []Explained
	// Unfed says why the harness could not feed a run all of the input
	// (then every route is inconclusive).
	Unfed string
	// Stuck lists the runs that did not end within the checker's timeout,
	// each with the goroutine stacks it printed when stopped: a hang, which
	// no verdict explains, reported and written as a case whatever the
	// comparison found.
	Stuck []StuckRun
	// FailedDrains lists the runs that SIGTERM was to drain and that
	// exited with an error instead: shown, not a verdict's breach.
	FailedDrains []string
	Kills        int // SIGKILLs and SIGTERMs that landed
	Stops        int // of which SIGTERMs (a drain, perhaps cut by a SIGKILL)
	Runs         int
	Clean, Final runResult
	Elapsed      time.Duration
}

func (ck *Checker) logf(format string, args ...any) {
	if ck.Log != nil {
		fmt.Fprintf(ck.Log, format, args...)
	}
}

// Check builds the case, runs it cleanly and under SIGKILLs, and compares
// what each route's sinks hold with what its verdict promises.
func (ck *Checker) Check(c *Case) (*Result, error) {
	start := time.Now()
	res := &Result{Case: c}
	ck.takeStuck()
	defer func() { res.Elapsed, res.Stuck = time.Since(start), ck.takeStuck() }()
	tmp, err := os.MkdirTemp(ck.Tmp, c.Name+"-")
	if err != nil {
		return nil, err
	}
	if !ck.Keep {
		defer os.RemoveAll(tmp)
	}
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	prep := func(source string) (string, error) {
		dir, stop, err := ck.prepare(tmp, c, source)
		if err == nil {
			stops = append(stops, stop)
		}
		return dir, err
	}
	ck.quietPolls = quietPolls(c)
	ck.serverDedup = serverDedupRE.MatchString(c.Source)
	cleanDir, err := prep(c.Source)
	if err != nil {
		return nil, err
	}
	ck.nameDir(cleanDir, "clean run")
	vs, err := ck.build(cleanDir)
	if err != nil {
		res.Rejected = err.Error()
		return res, nil
	}
	byName := map[string]Verdict{}
	for _, v := range vs {
		byName[v.Name] = v
	}
	for i, r := range c.Routes {
		v, ok := byName[r.Name]
		if !ok {
			return nil, fmt.Errorf("mqbc build printed no verdict for route %s", r.Name)
		}
		if r.Override != "" {
			v.Guarantee = r.Override
			v.Reasons = append(slices.Clone(v.Reasons), "(verdict overridden by the test: "+r.Override+")")
		}
		if r.OverrideDLQ {
			v.Reasons = append(slices.DeleteFunc(slices.Clone(v.Reasons), func(s string) bool { return strings.HasPrefix(s, "dlq: ") }),
				"dlq: effectively-once (overridden by the test)")
		}
		res.Verdicts = append(res.Verdicts, v)
		_ = i
	}
	if !slices.ContainsFunc(res.Verdicts, func(v Verdict) bool { return comparison(v.Guarantee) != nil }) {
		// Every route is at-most-once (or of a rung the checker cannot
		// test): a run could not contradict any verdict.
		ck.logf("  no verdict a run could contradict: not run\n")
		return res, nil
	}

	// The clean run, and the killed runs in a directory of their own.
	cleanRun := func(dir string) runResult {
		if c.follows() {
			return ck.followClean(dir, c)
		}
		return ck.run(dir, nil)
	}
	res.Clean = cleanRun(cleanDir)
	killDir, err := prep(c.Source)
	if err != nil {
		return nil, err
	}
	ck.nameDir(killDir, "run of the killed runs' directory")
	if c.follows() {
		res.Kills, res.Stops, res.Final = ck.followKilled(killDir, c, res.Clean)
	} else {
		res.Kills, res.Stops, _, res.Final = ck.killedRuns(killDir, c.Seed, c.Kills, res.Clean)
	}
	res.FailedDrains, ck.failedDrains = ck.failedDrains, nil
	res.Runs = 0
	clean, err := snapshots(cleanDir, c.Routes)
	if err != nil {
		return nil, err
	}
	killed, err := snapshots(killDir, c.Routes)
	if err != nil {
		return nil, err
	}
	ck.logf("  clean: %v; killed: %d kills (%d of them SIGTERM), final %v\n", res.Clean, res.Kills, res.Stops, res.Final)

	if res.Clean.unfed != "" || res.Final.unfed != "" {
		// The runs did not get the same input: nothing to compare.
		for _, r := range c.Routes {
			res.Inconclusive = append(res.Inconclusive, r.Name)
		}
		res.Unfed = res.Clean.unfed + res.Final.unfed
		ck.logf("  the input could not be fed whole: inconclusive\n")
		return res, nil
	}
	if res.Clean.stalled || res.Final.stalled {
		// A run that had not consumed its input proves nothing either way.
		for _, r := range c.Routes {
			res.Inconclusive = append(res.Inconclusive, r.Name)
		}
		ck.logf("  a run stalled: inconclusive\n")
		return res, nil
	}

	// A second clean run, made only when a difference needs confirming.
	var clean2 map[string]Snapshot
	var second runResult
	secondClean := func() (map[string]Snapshot, error) {
		if clean2 != nil || second.stalled {
			return clean2, nil
		}
		d, err := prep(c.Source)
		if err != nil {
			return nil, err
		}
		ck.nameDir(d, "second clean run")
		if second = cleanRun(d); second.stalled {
			return nil, nil
		}
		clean2, err = snapshots(d, c.Routes)
		return clean2, err
	}
	used := usedBy(c.Routes)

	if res.Clean.exitCode != 0 && res.Final.exitCode != 0 && wroteNothing(clean) {
		// The clean run failed before it wrote anything (a premise
		// refused at start-up, a path another route holds), and so did
		// the last killed run: the killed run agreeing with the clean one
		// tests nothing.
		for _, r := range c.Routes {
			res.Inconclusive = append(res.Inconclusive, r.Name)
			res.CleanFailed = append(res.CleanFailed, CleanFailure{Route: r.Name, Which: cleanNoKill, Run: res.Clean})
		}
		ck.logf("  the clean run failed before it wrote anything, so nothing was tested (inconclusive): %v\n", res.Clean)
		return res, nil
	}

	for i, r := range c.Routes {
		v := res.Verdicts[i]
		cmp := promiseFor(r, v)
		if cmp == nil {
			continue
		}
		what, diff := cmp.judge(clean[r.Name], killed[r.Name])
		if diff == "" {
			continue
		}
		if cmp == (exactPromise{}) {
			if why, ok := explainDLQ(r, clean[r.Name], killed[r.Name]); ok {
				res.Explained = append(res.Explained, Explained{Route: r.Name, Text: why})
				ck.logf("  %s: killed run differs, explained:\n%s", r.Name, why)
				continue
			}
		}
		if r.Timed {
			// A short dedup ttl or a per-delivery filter decides by the
			// clock: a killed run may legitimately decide otherwise.
			res.Inconclusive = append(res.Inconclusive, r.Name)
			ck.logf("  %s: killed run differs, but the route decides by the clock\n", r.Name)
			continue
		}
		if res.Clean.exitCode != 0 && res.Final.exitCode != 0 {
			// Both runs failed (a route with no dlq stopped at a record
			// it could not deliver, and mqbc run stops the file's other
			// routes with it): each route stopped wherever it was when
			// that happened, which is timing, not a verdict.
			res.Inconclusive = append(res.Inconclusive, r.Name)
			ck.logf("  %s: killed run differs, but both runs failed, so neither ran the route to its end\n", r.Name)
			continue
		}
		c2, err := secondClean()
		if err != nil {
			return nil, err
		}
		if c2 == nil {
			res.Inconclusive = append(res.Inconclusive, r.Name)
			ck.logf("  %s: killed run differs, and the second clean run stalled\n", r.Name)
			continue
		}
		if _, d := cmp.judge(clean[r.Name], c2[r.Name]); d != "" {
			// The clean runs differ too: what timing cannot change must
			// still hold.
			exact, dlqOnce := false, false
			if p, ok := cmp.(exactPromise); ok {
				exact, dlqOnce = true, p.dlqOnce
			}
			var broken string
			outcome, failed := judgeCleanDiff(res.Clean, second, func() string {
				broken = ck.invariantsOf(r, used, exact, dlqOnce, clean[r.Name], c2[r.Name], killed[r.Name])
				return broken
			})
			switch outcome {
			case diffCleanFailed:
				which := "first clean run"
				if res.Clean.exitCode == 0 {
					which = "second clean run"
				}
				res.Inconclusive = append(res.Inconclusive, r.Name)
				res.CleanFailed = append(res.CleanFailed, CleanFailure{Route: r.Name, Which: which, Run: *failed})
				ck.logf("  %s: killed run differs, but the %s failed, so the comparison tests nothing (inconclusive): %v\n", r.Name, which, *failed)
			case diffFalse:
				res.Findings = append(res.Findings, Finding{Route: r.Name, Verdict: v,
					What: "killed run breaks what timing cannot change (the two clean runs differ, but agree on this)",
					Diff: broken + "the killed run against the first clean run:\n" + diff})
			default:
				res.Unexplained = append(res.Unexplained, Unexplained{Route: r.Name, Verdict: v, Clean: d, Killed: diff, Second: second,
					Hints: cleanHints(r, used, clean[r.Name], c2[r.Name])})
				ck.logf("  %s: killed run differs, and so do two clean runs of a route the generator calls deterministic (unexplained)\n", r.Name)
			}
			continue
		}
		res.Findings = append(res.Findings, Finding{Route: r.Name, Verdict: v, What: "killed run: " + what, Diff: diff})
	}

	// Isolation: in a file of several routes, each route must leave what it
	// leaves when it runs alone (routes share no state they did not ask
	// to share).
	if len(c.Routes) > 1 && res.Clean.exitCode == 0 {
		for i, r := range c.Routes {
			v := res.Verdicts[i]
			cmp := promiseFor(r, v)
			if cmp == nil || r.Timed || slices.Contains(res.Inconclusive, r.Name) ||
				slices.ContainsFunc(res.Findings, func(f Finding) bool { return f.Route == r.Name }) ||
				slices.ContainsFunc(res.Unexplained, func(u Unexplained) bool { return u.Route == r.Name }) {
				continue
			}
			alone := func() (Snapshot, runResult, error) {
				d, err := prep(r.Source)
				if err != nil {
					return Snapshot{}, runResult{}, err
				}
				ck.nameDir(d, "run of route "+r.Name+" alone")
				rr := cleanRun(d)
				s, err := snapshot(d, r)
				return s, rr, err
			}
			a1, rr, err := alone()
			if err != nil {
				return nil, err
			}
			what, diff := cmp.judge(a1, clean[r.Name])
			if diff == "" || rr.stalled {
				continue
			}
			if rr.exitCode != 0 {
				res.Inconclusive = append(res.Inconclusive, r.Name)
				res.CleanFailed = append(res.CleanFailed, CleanFailure{Route: r.Name + " (alone)", Which: "first run alone", Run: rr})
				continue
			}
			a2, rr2, err := alone()
			if err != nil {
				return nil, err
			}
			if _, d := cmp.judge(a1, a2); d != "" {
				if outcome, _ := judgeCleanDiff(rr, rr2, func() string { return "" }); outcome == diffCleanFailed {
					res.Inconclusive = append(res.Inconclusive, r.Name)
					res.CleanFailed = append(res.CleanFailed, CleanFailure{Route: r.Name + " (alone)", Which: "second run alone", Run: rr2})
					continue
				}
				// Not Timed (skipped above), yet two runs alone differ.
				res.Unexplained = append(res.Unexplained, Unexplained{Route: r.Name + " (alone)", Verdict: v, Clean: d,
					Killed: "(no killed run: the file's clean run against the route's first run alone)\n" + diff, Second: rr2,
					Hints: cleanHints(r, usedBy([]RouteShape{r}), a1, a2)})
				continue
			}
			res.Findings = append(res.Findings, Finding{Route: r.Name, Verdict: v,
				What: "beside the file's other routes (clean run) vs alone: " + what, Diff: diff})
		}
	}
	return res, nil
}

// invariantsOf is invariants, unless the checker's test turned it off.
func (ck *Checker) invariantsOf(r RouteShape, used map[string]int, exact, dlqOnce bool, c1, c2, killed Snapshot) string {
	if ck.noInvariants {
		return ""
	}
	return invariants(r, used, exact, dlqOnce, c1, c2, killed)
}

func snapshots(dir string, routes []RouteShape) (map[string]Snapshot, error) {
	out := map[string]Snapshot{}
	for _, r := range routes {
		s, err := snapshot(dir, r)
		if err != nil {
			return nil, err
		}
		out[r.Name] = s
	}
	return out, nil
}

// promise is what a verdict lets the checker demand of a run against the
// reference (clean) run.
type promise interface {
	judge(ref, got Snapshot) (what, diff string)
}

func comparison(guarantee string) promise {
	switch guarantee {
	case exactlyOnce, effectivelyOnce:
		return exactPromise{}
	case atLeastOnce:
		return noLossPromise{}
	}
	// at-most-once may lose and duplicate; an unknown rung promises
	// nothing the checker knows how to test.
	return nil
}

// promiseFor is what route r's verdict v lets the checker demand: that of
// its rung, and, on an effectively-once route whose dead-letter sink is a
// keyed table the verdict calls effectively-once too, no dead-lettered
// record twice.
func promiseFor(r RouteShape, v Verdict) promise {
	cmp := comparison(v.Guarantee)
	if _, exact := cmp.(exactPromise); exact && dlqOnce(v) &&
		slices.ContainsFunc(r.Artifacts, func(a Artifact) bool { return a.KeyedDLQ }) {
		return exactPromise{dlqOnce: true}
	}
	return cmp
}

// exactPromise: the sinks hold exactly what the clean run left, as
// multisets; a dead-letter sink is compared as a set (of positions, or of
// rows), since a DLQ write is at-least-once by design, unless dlqOnce:
// the verdict calls the dead-letter write effectively-once.
type exactPromise struct{ dlqOnce bool }

func (p exactPromise) judge(ref, got Snapshot) (string, string) {
	var b strings.Builder
	for _, g := range groups(ref.Full, got.Full) {
		a, z := ref.Full[g], got.Full[g]
		set := strings.HasSuffix(g, "/dlq") && !p.dlqOnce
		var lines []string
		for _, k := range keys(a, z) {
			na, nz := a[k], z[k]
			if set {
				na, nz = min(na, 1), min(nz, 1)
			}
			switch {
			case na > nz:
				lines = append(lines, fmt.Sprintf("  - %d× %s", na-nz, k))
			case nz > na:
				lines = append(lines, fmt.Sprintf("  + %d× %s", nz-na, k))
			}
		}
		if len(lines) > 0 {
			fmt.Fprintf(&b, "%s (clean %d, this run %d records; - missing, + extra):\n%s\n", g, size(a), size(z), strings.Join(clip(lines, 12), "\n"))
		}
	}
	return "sinks differ from the clean run", b.String()
}

// noLossPromise: every record of the clean run is there at least once
// (columns a DO UPDATE rewrites left out).
type noLossPromise struct{}

func (noLossPromise) judge(ref, got Snapshot) (string, string) {
	var b strings.Builder
	for _, g := range groups(ref.Kept, got.Kept) {
		if ref.AnyBranch[g] {
			continue
		}
		a, z := ref.Kept[g], got.Kept[g]
		dlq := strings.HasSuffix(g, "/dlq")
		var lines []string
		for _, k := range keys(a, nil) {
			// A dead-lettered record may legitimately land elsewhere on a
			// replay (its outcome changed); an unparsable line may not.
			if dlq && !strings.HasSuffix(k, unparsable) {
				continue
			}
			if z[k] == 0 {
				lines = append(lines, fmt.Sprintf("  - %s", k))
			}
		}
		if len(lines) > 0 {
			fmt.Fprintf(&b, "%s: %d of the clean run's %d distinct records missing:\n%s\n", g, len(lines), len(a), strings.Join(clip(lines, 12), "\n"))
		}
	}
	return "records of the clean run lost", b.String()
}

func groups(a, b map[string]Multiset) []string {
	var out []string
	for g := range a {
		out = append(out, g)
	}
	for g := range b {
		if _, ok := a[g]; !ok {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out
}

func keys(a, b Multiset) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func size(m Multiset) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

func clip(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return append(lines[:n:n], fmt.Sprintf("  … and %d more", len(lines)-n))
}
