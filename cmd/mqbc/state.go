package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

func init() {
	register(&command{
		Name:    "state",
		Usage:   "mqbc state show [--state DIR] FILE… [ROUTE…] | mqbc state reset [--state DIR] [--yes] FILE… ROUTE | mqbc state adopt [--state DIR] FILE… ROUTE",
		Summary: "show where each route keeps its checkpoint and dedup keys and what they hold, reset one route's state so its next run starts over, or hand a route the state its plan file had under another name",
		Run:     runState,
	})
}

func runState(args []string, stdout, stderr io.Writer) int {
	c := commands["state"]
	if len(args) == 0 || (args[0] != "show" && args[0] != "reset" && args[0] != "adopt") {
		fmt.Fprintln(stderr, "usage: "+c.Usage)
		return exitUsage
	}
	sub := args[0]
	fs := newFlags(c, stderr)
	stateDir := fs.String("state", "", stateFlagDoc)
	yes := fs.Bool("yes", false, "reset without asking (state reset)")
	ops, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return exitUsage
	}
	paths, routes := splitOperands(ops)
	if len(paths) == 0 || sub != "show" && len(routes) != 1 {
		fmt.Fprintln(stderr, "usage: "+c.Usage)
		if sub != "show" && len(paths) > 0 {
			fmt.Fprintf(stderr, "mqbc state %s: name the one route after the .mqb files\n", sub)
		}
		return exitUsage
	}
	if sub != "reset" && *yes {
		fmt.Fprintf(stderr, "mqbc state %s: --yes is for state reset\n", sub)
		return exitUsage
	}
	p, ok := compileReported(c, paths, "text", stderr)
	if !ok {
		return exitError
	}
	if err := applyStateDir(p, *stateDir); err != nil {
		fmt.Fprintln(stderr, "mqbc state: --state:", err)
		return exitUsage
	}
	resolvePaths(p)
	opts := runtime.Options{StateDir: *stateDir}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if sub == "show" {
		states, err := runtime.RoutesState(ctx, *p, opts, routes...)
		for _, s := range states {
			writeRouteState(stdout, s)
		}
		if err != nil {
			fmt.Fprintln(stderr, "mqbc state show:", plan.RedactURLs(err.Error()))
			return exitError
		}
		return exitOK
	}
	if sub == "adopt" {
		return adoptState(ctx, *p, opts, routes[0], stdout, stderr)
	}
	return resetState(ctx, *p, opts, routes[0], paths, *yes, os.Stdin, stdout, stderr)
}

// adoptState hands route the state recorded as another plan file's.
func adoptState(ctx context.Context, p plan.Plan, opts runtime.Options, route string, stdout, stderr io.Writer) int {
	before, err := runtime.AdoptRouteState(ctx, p, opts, route)
	if err != nil {
		fmt.Fprintln(stderr, "mqbc state adopt:", plan.RedactURLs(err.Error()))
		return exitError
	}
	var from []string
	if cp := before.Checkpoint; cp != nil && cp.Found && cp.Position.Plan != "" && cp.Position.Plan != before.Plan {
		from = append(from, fmt.Sprintf("its checkpoint (from %s)", cp.Position.Plan))
	}
	for _, d := range before.Dedup {
		if !d.Missing && !d.Shared() && d.Owner != "" && d.Owner != before.Plan {
			from = append(from, fmt.Sprintf("dedup namespace %s (from %s)", d.Namespace, d.Owner))
		}
	}
	if len(from) == 0 {
		fmt.Fprintf(stdout, "route %s: its state was already %s's\n", route, before.Plan)
		return exitOK
	}
	fmt.Fprintf(stdout, "route %s: %s now %s's\n", route, strings.Join(from, ", "), before.Plan)
	return exitOK
}

const stateFlagDoc = "keep the checkpoint and dedup stores left at their defaults in DIR/state and DIR/dedup instead of .mqb/ beside the .mqb file (give run, check and state the same)"

// splitOperands tells the .mqb files (an operand ending in .mqb, or
// naming a file that exists) from route names.
func splitOperands(ops []string) (paths, routes []string) {
	for _, o := range ops {
		if strings.HasSuffix(o, ".mqb") {
			paths = append(paths, o)
			continue
		}
		if info, err := os.Stat(o); err == nil && info.Mode().IsRegular() {
			paths = append(paths, o)
			continue
		}
		routes = append(routes, o)
	}
	return paths, routes
}

// writeRouteState prints one route's state, a block of indented lines.
func writeRouteState(w io.Writer, s runtime.RouteState) {
	fmt.Fprintf(w, "route %s\n", s.Route)
	cp := s.Checkpoint
	switch {
	case cp == nil:
		fmt.Fprintln(w, "  checkpoint  kept by the source's broker (consumer group, durable consumer); mqbc state neither shows nor resets it")
	case !cp.Found:
		fmt.Fprintf(w, "  checkpoint  none in %s: the next run reads the source from its start\n", cp.Where)
	default:
		fmt.Fprintf(w, "  checkpoint  %s, %s, in %s\n", cp.Describe(), cp.Detail(), cp.Where)
		if cp.File != "" { // a source that reads files
			id := cp.Identity
			if id == "" {
				id = "not recorded (written by an older mqb)"
			}
			fmt.Fprintf(w, "              file identity: %s\n", id)
		}
		if owner := cp.Position.Plan; owner != "" && owner != s.Plan && s.Plan != "" {
			fmt.Fprintf(w, "              saved by the route %s of %s, not of %s: a run refuses to start (mqbc state adopt, if the file was renamed)\n", s.Route, owner, s.Plan)
		}
	}
	for _, d := range s.Dedup {
		switch {
		case d.Missing:
			fmt.Fprintf(w, "  dedup       namespace %s in %s: no keys (the store does not exist yet)\n", d.Namespace, d.Where)
		default:
			shared := ""
			if d.Shared() {
				shared = " (shared with other routes on purpose)"
			}
			fmt.Fprintf(w, "  dedup       namespace %s%s in %s: %d live keys\n", d.Namespace, shared, d.Where, d.Live)
		}
		if d.Owner != "" && d.Owner != s.Plan && s.Plan != "" && !d.Shared() {
			fmt.Fprintf(w, "              belongs to the route %s of %s, not of %s: a run refuses to start (mqbc state adopt, if the file was renamed)\n", s.Route, d.Owner, s.Plan)
		}
		if d.Legacy > 0 {
			fmt.Fprintf(w, "              and %d keys written by an mqb before namespaces, which no route sees (the route refuses to start until they are removed)\n", d.Legacy)
		}
	}
	for _, o := range s.Outputs {
		what := "file"
		switch {
		case o.Parts:
			what = "part files in"
		case o.Label != "":
			what = o.Label
		}
		gone := ""
		if o.Gone {
			gone = " (gone or empty)"
		}
		fmt.Fprintf(w, "  output      %s %s%s\n", what, o.Path, gone)
	}
}

// resetState says what resetting route's state means, asks (unless yes),
// and resets it.
func resetState(ctx context.Context, p plan.Plan, opts runtime.Options, route string, paths []string, yes bool, stdin io.Reader, stdout, stderr io.Writer) int {
	states, err := runtime.RoutesState(ctx, p, opts, route)
	if err != nil {
		fmt.Fprintln(stderr, "mqbc state reset:", plan.RedactURLs(err.Error()))
		return exitError
	}
	s := states[0]
	if err := s.OwnedElsewhere(); err != nil {
		fmt.Fprintf(stderr, "mqbc state reset: %v; to forget that route's state, reset it from its own plan (mqbc state reset %s %s)\n", err, err.Owner, route)
		return exitError
	}
	if !resettable(s) {
		fmt.Fprintf(stdout, "route %s has no state to reset: its next run reads the source from its start\n", route)
		return exitOK
	}
	writeResetConsequences(stdout, s)
	if !yes {
		fmt.Fprintf(stdout, "Reset route %s? [y/N] ", route)
		answer, _ := bufio.NewReader(stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			fmt.Fprintln(stdout)
			fmt.Fprintf(stderr, "mqbc state reset: not confirmed; nothing was reset (answer y, or pass --yes: mqbc state reset --yes %s %s)\n", strings.Join(paths, " "), route)
			return exitError
		}
	}
	before, err := runtime.ResetRouteState(ctx, p, opts, route)
	if err != nil {
		fmt.Fprintln(stderr, "mqbc state reset:", plan.RedactURLs(err.Error()))
		return exitError
	}
	var done []string
	if before.Checkpoint != nil && before.Checkpoint.Found {
		done = append(done, "checkpoint deleted")
	}
	for _, d := range before.Dedup {
		if !d.Missing && !d.Shared() {
			done = append(done, fmt.Sprintf("%d dedup keys of namespace %s deleted", d.Live, d.Namespace))
		}
	}
	fmt.Fprintf(stdout, "route %s: state reset (%s)\n", route, strings.Join(done, ", "))
	return exitOK
}

// resettable reports whether reset has anything of the route's to delete.
func resettable(s runtime.RouteState) bool {
	if s.Checkpoint != nil && s.Checkpoint.Found {
		return true
	}
	for _, d := range s.Dedup {
		if !d.Missing && !d.Shared() && d.Live > 0 {
			return true
		}
	}
	return false
}

func writeResetConsequences(w io.Writer, s runtime.RouteState) {
	fmt.Fprintf(w, "Resetting route %s:\n", s.Route)
	if cp := s.Checkpoint; cp != nil && cp.Found {
		fmt.Fprintf(w, "  - deletes its checkpoint (%s, %s) in %s: the next run reads the source from its start\n", cp.Describe(), cp.Detail(), cp.Where)
	}
	for _, d := range s.Dedup {
		switch {
		case d.Missing:
		case d.Shared():
			fmt.Fprintf(w, "  - keeps namespace %s in %s (%d keys): it is shared with other routes on purpose, and their keys are not this route's to delete\n", d.Namespace, d.Where, d.Live)
		default:
			fmt.Fprintf(w, "  - deletes the %d dedup keys of namespace %s in %s: records with those keys are no longer dropped as duplicates\n", d.Live, d.Namespace, d.Where)
		}
	}
	fmt.Fprintln(w, "  What the route already wrote stays: part files already written (name_by = source_position) are kept, and the")
	fmt.Fprintln(w, "  positions they cover are skipped when read again; a sink idempotent on the record's key (ON CONFLICT, an upsert,")
	fmt.Fprintln(w, "  a ReplacingMergeTree) absorbs the replay; a sink without idempotence (a file appended by write time, an HTTP")
	fmt.Fprintln(w, "  POST, a plain INSERT) gets every record delivered before again.")
}

// stateNote is one line mqbc run says about a route's state before it
// runs: where it resumes (info), or that its output is gone (warn).
type stateNote struct {
	warn  bool
	route string
	msg   string
}

// stateNotes says, before a run, where each route resumes, and warns when
// state says records were delivered to a file output that is gone or
// empty: the run will not write them again. A state that cannot be read
// is left to the run itself to report.
func stateNotes(ctx context.Context, p plan.Plan, opts runtime.Options, paths []string) []stateNote {
	states, _ := runtime.RoutesState(ctx, p, opts)
	var notes []stateNote
	for _, s := range states {
		if s.OwnedElsewhere() != nil {
			continue // the run refuses, with its own words
		}
		if cp := s.Checkpoint; cp.Resumes() {
			notes = append(notes, stateNote{route: s.Route,
				msg: fmt.Sprintf("resuming route %s from %s (state in %s; %s)", s.Route, cp.Describe(), cp.Where, cp.Detail())})
		}
		if !s.HasState() {
			continue
		}
		for _, o := range s.Outputs {
			if !o.Gone {
				continue
			}
			var held []string
			if cp := s.Checkpoint; cp.Resumes() {
				held = append(held, fmt.Sprintf("its checkpoint is at %s, %s (in %s)", cp.Describe(), cp.Detail(), cp.Where))
			}
			for _, d := range s.Dedup {
				if d.Live > 0 {
					held = append(held, fmt.Sprintf("its dedup namespace %s remembers %d keys (in %s)", d.Namespace, d.Live, d.Where))
				}
			}
			what := "output file " + o.Path + " is gone or empty"
			switch {
			case o.Parts:
				what = "part directory " + o.Path + " is gone or holds no part file"
			case o.Label != "":
				what = o.Label + " " + o.Path + " is gone or empty"
			}
			notes = append(notes, stateNote{warn: true, route: s.Route,
				msg: fmt.Sprintf("route %s: its %s, but its state says records were delivered: %s. "+
					"This run will not write again what that state says was delivered. To write everything again, reset the route first: "+
					"mqbc state reset %s %s", s.Route, what, strings.Join(held, "; "), strings.Join(paths, " "), s.Route)})
		}
	}
	return notes
}
