// Command soundness checks the compiler's delivery verdicts against what
// routes really do. It generates routes from seeds (file sources; id,
// dedup, filter, map, handle steps; switch, fanout, request; SQLite tables
// with every kind of conflict clause, positional and appended file sinks;
// files of several routes), asks `mqbc build` for each route's verdict,
// then runs the file cleanly once and, in a directory of its own, under
// SIGKILLs at seeded random instants and to completion, and compares what
// every sink holds:
//
//   - effectively-once and exactly-once routes must hold exactly what the
//     clean run left (every table's rows, every part file's lines, as
//     multisets; the dead-letter file's record positions as a set);
//   - at-least-once routes must hold every record of the clean run;
//   - at-most-once routes may lose and duplicate;
//   - in a file of several routes, each route must leave what it leaves
//     when run alone.
//
// A difference that a second clean run does not reproduce is a false
// verdict: the seed, the routes, the verdict with its reasons and the
// difference are printed, and the case is written to testdata/soundness
// as a regression case. When the second clean run differs too, the
// killed run must still keep what timing cannot change (timing.go: the
// number of records of a group, the keys of a keyed table); breaking it
// is a false verdict as well. Otherwise the difference is timing-dependent
// on a route the generator marks Timed (it decides by the clock), and
// "unexplained" on any other: the generator calls that route
// deterministic, so either its model misses a per-delivery value or an
// order-dependent table, or the route's identity depends on the delivery.
// An unexplained route is printed with both differences and written as
// a case like a false verdict. A route whose runs differ while one of
// its clean runs failed (a non-zero exit we did not cause) is
// inconclusive: a clean run that stopped early is no reference. It is
// counted apart, and printed with the failed run's error, but judges no
// verdict and is not written as a case. A run that has not ended after a
// minute is stuck (stuck.go): it is sent SIGQUIT, and the goroutine stacks
// it prints are printed and written with the case, whatever the
// comparison found.
//
//	go run ./soundness -seeds 1000 -kills 8
//
// ends with "routes checked: N, claimed effectively-once: M, false
// verdicts: F, unexplained (…): U, inconclusive (a clean run failed): I,
// explained differences: E, stuck runs (…): S" and exits 1 when F > 0.
// -reasons builds the generated files only and counts their verdict
// reasons: which rules of the prover the seeds reach (rules.go and
// reach.go add shapes for those they did not). The CI test
// is behind the soundness build tag (go test -tags soundness ./soundness).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

func cli(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soundness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seeds := fs.Int("seeds", 100, "how many seeds (one generated file of 1–3 routes each)")
	first := fs.Uint64("first", 1, "the first seed")
	kills := fs.Int("kills", 8, "SIGKILLs to land in each killed run")
	stops := fs.Int("stops", 0, "percent of those interruptions that are SIGTERM instead (a drain; a third of them cut by a SIGKILL within 150 ms)")
	out := fs.String("out", "testdata/soundness", "directory the regression cases of false verdicts are written to (empty: none)")
	mqbc := fs.String("mqbc", "", "mqbc binary to check (default: build ./cmd/mqbc)")
	verbose := fs.Bool("v", false, "print every case's routes and runs")
	keep := fs.Bool("keep", false, "keep the run directories")
	show := fs.Bool("show", false, "print the generated files and exit")
	cases := fs.String("cases", "", "check the regression cases (*.txtar) in this directory instead of generating")
	sources := fs.String("sources", strings.Join(moreKinds, ","), "the sources of issue #18 a seed reading the file may draw instead (about a quarter of them do): a comma list of "+strings.Join(moreKinds, ", ")+", or none")
	force := fs.String("source", "", "every seed reads this source of issue #18 ("+strings.Join(moreKinds, ", ")+"), whatever it draws")
	fs.BoolVar(&onlyTransforms, "transforms", false, "check only the seeds that draw unnest or parse (see transforms.go); the others are skipped")
	fs.BoolVar(&onlyRules, "rules", false, "check only the seeds that draw a shape of rules.go or reach.go; the others are skipped")
	fs.BoolVar(&serverSinks, "server-sinks", false, "let seeds put some sql sinks on PostgreSQL and MariaDB (see sqlservers.go); needs their server binaries")
	fs.BoolVar(&clickhouseSinks, "clickhouse", false, "let seeds put some sinks on ClickHouse (see clickhouse.go); needs clickhouse-server")
	fs.BoolVar(&mongoSinks, "mongo-sinks", false, "let seeds put some sinks on MongoDB (FerretDB; see mongosink.go): id_field stable, per-delivery or unset, with and without report_outcome; the seeds that draw none are skipped")
	reasons := fs.Bool("reasons", false, "build the generated files only (no runs) and print how often each verdict reason occurs, numbers and names blanked")
	jobs := fs.Int("j", 1, "cases checked at once (each in its own directories, with its own brokers); most of a case's time is waiting, so 3 keeps 2 cores busy")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *force != "" && !slices.Contains(moreKinds, *force) {
		fmt.Fprintf(stderr, "-source: unknown source %q (want one of %s)\n", *force, strings.Join(moreKinds, ", "))
		return 2
	}
	forceSource = *force
	moreSources = nil
	for k := range strings.SplitSeq(*sources, ",") {
		switch {
		case k == "none" || k == "":
		case slices.Contains(moreKinds, k):
			moreSources = append(moreSources, k)
		default:
			fmt.Fprintf(stderr, "-sources: unknown source %q (want %s or none)\n", k, strings.Join(moreKinds, ", "))
			return 2
		}
	}
	if *show {
		for s := *first; s < *first+uint64(*seeds); s++ {
			c, err := generateFrom(s, *kills, forceSource)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 1
			}
			fmt.Fprintf(stdout, "# seed %d\n%s\n", s, c.Source)
		}
		return 0
	}
	tmp, err := os.MkdirTemp("", "mqb-soundness")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if !*keep {
		defer os.RemoveAll(tmp)
	}
	defer stopServers()
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *mqbc == "" {
		if *mqbc, err = buildMqbc(root, tmp); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	if *out != "" && !filepath.IsAbs(*out) {
		*out = filepath.Join(root, *out)
	}
	if *reasons {
		return reasonTally(*mqbc, tmp, *first, *seeds, *kills, stdout, stderr)
	}
	var tally Tally
	start := time.Now()
	var recorded []string
	if *cases != "" {
		if recorded, err = filepath.Glob(filepath.Join(*cases, "*.txtar")); err != nil || len(recorded) == 0 {
			fmt.Fprintf(stderr, "no regression cases in %s\n", *cases)
			return 1
		}
		*out = "" // they are on file already
	}
	n := *seeds
	if recorded != nil {
		n = len(recorded)
	}
	// Cases are checked by *jobs workers, each with a Checker of its own;
	// what a case prints is printed whole, in the order cases finish.
	var mu sync.Mutex
	failed := false
	next := 0
	var wg sync.WaitGroup
	for range max(*jobs, 1) {
		ck := &Checker{Mqbc: *mqbc, Tmp: tmp, Keep: *keep, Stops: *stops}
		if *verbose {
			ck.Log = stderr
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := failed || i >= n
				mu.Unlock()
				if stop {
					return
				}
				if !checkOne(ck, i, *first, recorded, *kills, *verbose, *out, &tally, &mu, stdout, stderr) {
					mu.Lock()
					failed = true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if failed {
		return 1
	}
	tally.Elapsed = time.Since(start)
	fmt.Fprintln(stdout, tally.Mix())
	fmt.Fprintln(stdout, tally.Line())
	if tally.False > 0 {
		return 1
	}
	return 0
}

// checkOne checks case i (the seed first+i, or the i-th recorded case),
// adds its result to tally and prints it, under mu. It reports false when
// the case could not be checked at all.
// forceSource is the -source flag: the source every generated seed reads
// ("": what it draws).
var forceSource string

func checkOne(ck *Checker, i int, first uint64, recorded []string, kills int, verbose bool, out string, tally *Tally, mu *sync.Mutex, stdout, stderr io.Writer) bool {
	s := first + uint64(i)
	var c *Case
	var err error
	if recorded != nil {
		c, err = readCase(recorded[i])
	} else {
		c, err = generateFrom(s, kills, forceSource)
		if err == nil && (onlyTransforms && c.tx == nil || onlyRules && !c.ruleDrawn || mongoSinks && !c.mongoDrawn) {
			return true
		}
	}
	if err != nil {
		mu.Lock()
		fmt.Fprintln(stderr, err)
		mu.Unlock()
		return false
	}
	if verbose {
		mu.Lock()
		fmt.Fprintf(stderr, "# seed %d\n%s", s, c.Source)
		mu.Unlock()
	}
	res, err := ck.Check(c)
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		fmt.Fprintf(stderr, "seed %d: %v\n", s, err)
		return false
	}
	tally.Add(res)
	fmt.Fprintln(stdout, summaryLine(res))
	written := len(res.Findings) > 0 || len(res.Unexplained) > 0 || len(res.Stuck) > 0
	if !written && len(res.CleanFailed) > 0 {
		// Inconclusive, but a clean run that failed is shown, not
		// written as a case: it judges no verdict.
		fmt.Fprintln(stdout, indent(report(res)))
	}
	if !written {
		// An explained difference is shown, not written as a case.
		for _, e := range res.Explained {
			fmt.Fprintln(stdout, indent("explained, "+e.Route+":\n"+e.Text))
		}
	}
	if written {
		fmt.Fprintln(stdout, indent(report(res)))
		if out != "" {
			path, err := writeCase(out, res)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return false
			}
			fmt.Fprintf(stdout, "  regression case written to %s\n", path)
		}
	}
	return true
}

// Tally sums results over a run of the checker.
type Tally struct {
	Files, Routes, Claimed, False, Rejected, Inconclusive, Kills, Stops, FailedDrains int
	// Unexplained counts routes the generator calls deterministic whose
	// two clean runs differed (Result.Unexplained).
	Unexplained int
	// CleanFailed counts the inconclusive routes whose clean run failed
	// (Result.CleanFailed), CleanFailedSeeds their cases.
	CleanFailed int
	// Explained counts the routes whose killed run differed in a way the
	// verdict allows (Result.Explained), ExplainedSeeds their cases.
	Explained      int
	ExplainedSeeds []string
	// Stuck counts the runs stopped for not ending (Result.Stuck),
	// StuckSeeds their cases.
	Stuck                                                  int
	ByVerdict                                              map[string]int
	FalseSeeds, Unexplaineds, CleanFailedSeeds, StuckSeeds []string
	Elapsed                                                time.Duration
}

func (t *Tally) Add(res *Result) {
	if t.ByVerdict == nil {
		t.ByVerdict = map[string]int{}
	}
	t.Files++
	if len(res.Stuck) > 0 {
		t.Stuck += len(res.Stuck)
		t.StuckSeeds = append(t.StuckSeeds, res.Case.Name)
	}
	if res.Rejected != "" {
		t.Rejected++
		return
	}
	t.Kills += res.Kills
	t.Stops += res.Stops
	t.FailedDrains += len(res.FailedDrains)
	t.Inconclusive += len(res.Inconclusive)
	t.Unexplained += len(res.Unexplained)
	t.CleanFailed += len(res.CleanFailed)
	t.Explained += len(res.Explained)
	if len(res.Explained) > 0 {
		t.ExplainedSeeds = append(t.ExplainedSeeds, res.Case.Name)
	}
	if len(res.CleanFailed) > 0 {
		t.CleanFailedSeeds = append(t.CleanFailedSeeds, res.Case.Name)
	}
	if len(res.Unexplained) > 0 {
		t.Unexplaineds = append(t.Unexplaineds, res.Case.Name)
	}
	for _, v := range res.Verdicts {
		t.Routes++
		t.ByVerdict[v.Guarantee]++
		if v.Guarantee == effectivelyOnce || v.Guarantee == exactlyOnce {
			t.Claimed++
		}
	}
	var routes []string
	for _, f := range res.Findings {
		if !slices.Contains(routes, f.Route) {
			routes = append(routes, f.Route)
		}
	}
	t.False += len(routes)
	if len(routes) > 0 {
		t.FalseSeeds = append(t.FalseSeeds, res.Case.Name)
	}
}

func (t *Tally) Mix() string {
	var parts []string
	for _, g := range []string{exactlyOnce, effectivelyOnce, atLeastOnce, atMostOnce} {
		parts = append(parts, fmt.Sprintf("%s %d", g, t.ByVerdict[g]))
	}
	for g, n := range t.ByVerdict {
		if !slices.Contains([]string{exactlyOnce, effectivelyOnce, atLeastOnce, atMostOnce}, g) {
			parts = append(parts, fmt.Sprintf("%s %d", g, n))
		}
	}
	perMin := 0.0
	if t.Elapsed > 0 {
		perMin = float64(t.Routes) / t.Elapsed.Minutes()
	}
	return fmt.Sprintf("files %d (rejected by build %d), verdicts: %s; kills landed %d (SIGTERM %d, drains failed %d); timing-dependent differences %d; %.1f min, %.1f routes/min",
		t.Files, t.Rejected, strings.Join(parts, ", "), t.Kills, t.Stops, t.FailedDrains, t.Inconclusive-t.CleanFailed, t.Elapsed.Minutes(), perMin)
}

func (t *Tally) Line() string {
	line := fmt.Sprintf("routes checked: %d, claimed effectively-once: %d, false verdicts: %d, unexplained (clean runs differ on a route the generator calls deterministic): %d, inconclusive (a clean run failed): %d",
		t.Routes, t.Claimed, t.False, t.Unexplained, t.CleanFailed)
	if len(t.CleanFailedSeeds) > 0 {
		line += " (" + strings.Join(t.CleanFailedSeeds, ", ") + ")"
	}
	line += fmt.Sprintf(", explained differences: %d", t.Explained)
	if len(t.ExplainedSeeds) > 0 {
		line += " (" + strings.Join(t.ExplainedSeeds, ", ") + ")"
	}
	line += fmt.Sprintf(", stuck runs (stopped with their stacks): %d", t.Stuck)
	if len(t.StuckSeeds) > 0 {
		line += " (" + strings.Join(t.StuckSeeds, ", ") + ")"
	}
	return line
}

func summaryLine(res *Result) string {
	c := res.Case
	if res.Rejected != "" {
		return fmt.Sprintf("%s: rejected by mqbc build: %s", c.Name, firstLine(res.Rejected, 2))
	}
	var vs []string
	for _, v := range res.Verdicts {
		mark := "ok"
		if slices.ContainsFunc(res.Explained, func(e Explained) bool { return e.Route == v.Name }) {
			mark = "ok (explained)"
		}
		if slices.Contains(res.Inconclusive, v.Name) {
			mark = "timing-dependent"
		}
		for _, f := range res.CleanFailed {
			if f.Route == v.Name || f.Route == v.Name+" (alone)" {
				mark = "INCONCLUSIVE (" + f.Which + " failed)"
			}
		}
		for _, u := range res.Unexplained {
			if u.Route == v.Name || u.Route == v.Name+" (alone)" {
				mark = "UNEXPLAINED"
			}
		}
		for _, f := range res.Findings {
			if f.Route == v.Name {
				mark = "FALSE"
			}
		}
		vs = append(vs, fmt.Sprintf("%s %s %s", v.Name, v.Guarantee, mark))
	}
	if res.Unfed != "" {
		vs = append(vs, "input not fed whole: "+res.Unfed)
	}
	for _, s := range res.Stuck {
		vs = append(vs, "STUCK: "+s.Which)
	}
	for _, d := range res.FailedDrains {
		vs = append(vs, "DRAIN FAILED: "+firstLine(d, 1))
	}
	kills := fmt.Sprintf("%d kills", res.Kills)
	if res.Stops > 0 {
		kills += fmt.Sprintf(" (%d SIGTERM)", res.Stops)
	}
	return fmt.Sprintf("%s: %s; %s, %.1fs", c.Name, strings.Join(vs, "; "), kills, res.Elapsed.Seconds())
}

func firstLine(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
