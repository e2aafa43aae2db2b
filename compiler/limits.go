package compiler

import (
	"fmt"
	"runtime/debug"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/plan"
)

// Limits bound what one build accepts. Measured on this project's machine,
// checking a route holds 7–26 KiB live and peaks at about 60 KiB of RSS
// (10,000 realistic routes: 620 MB, 23 s), so a generated million-route
// file would exhaust memory; over a bound the build stops with E003 before
// the expensive stage instead.
type Limits struct {
	SourceBytes int // bytes of all the files together, checked before lexing
	Tokens      int // tokens of all the files together, checked while lexing
	Routes      int // routes of all the files together, checked before checking any
}

// DefaultLimits is what `mqbc build`, `run` and the editor accept.
var DefaultLimits = Limits{SourceBytes: lang.DefaultLimits.Bytes, Tokens: lang.DefaultLimits.Tokens, Routes: 10_000}

const limitDetail = "The bound keeps a build from exhausting memory. Split the routes over several files built and run separately (one `mqbc run` per group)."

// CompileSourcesWithin is CompileSources bounded by lim (a zero field means
// no bound). Over a bound the plan has no routes and the list says which
// bound, where.
func CompileSourcesWithin(srcs []Source, lim Limits) (*plan.Plan, diag.List) {
	files, diags := parseWithin(srcs, lim)
	if files == nil {
		return &plan.Plan{Version: plan.Version, Routes: []plan.Route{}}, diags
	}
	p, ds := Compile(files)
	return p, sortedAfter(diags, ds)
}

// CompileSourcesTo is CompileSourcesWithin handing each route to emit as
// it is compiled instead of collecting a plan, and letting go of each
// route's syntax tree once it is compiled: a build of many routes then
// holds neither all their trees nor all their plans. The routes come in
// the plan's order and are the plan's routes; the diagnostics come once
// every route is checked, so a caller must keep what it is handed until
// it knows they hold no error. Over a bound no route is handed on.
func CompileSourcesTo(srcs []Source, lim Limits, emit func(*plan.Route)) diag.List {
	// The parse keeps nearly all it allocates (every declaration's tree
	// is held until its route is compiled), so a collection during it
	// frees next to nothing while marking the growing tree again each
	// time: at 10,000 routes a dozen cycles marking some 400 MB, a sixth
	// of the build's CPU. The collector waits until the parse is done;
	// the parse's memory is bounded by lim's token bound all the same.
	gc := debug.SetGCPercent(-1)
	files, diags := parseWithin(srcs, lim)
	debug.SetGCPercent(gc)
	if files == nil {
		return diags
	}
	return sortedAfter(diags, compileEach(files, true, emit))
}

// sortedAfter is the parse's diagnostics and then the check's, each
// reported once, in order.
func sortedAfter(parsed, checked diag.List) diag.List {
	diags := dedupe(append(parsed, checked...))
	diags.Sort()
	return diags
}

// parseWithin parses the sources within lim. Over a bound, files is nil
// and the list says which bound, where.
func parseWithin(srcs []Source, lim Limits) (files []*lang.File, diags diag.List) {
	total := 0
	for _, s := range srcs {
		total += len(s.Src)
		if lim.SourceBytes > 0 && total > lim.SourceBytes {
			var l diag.List
			at := diag.Pos{File: s.Name, Line: 1, Col: 1}
			l.Add("E003", diag.Range{Start: at, End: at},
				fmt.Sprintf("the build's files hold more than %s of source (%s brings it over); one build accepts at most %s", mib(lim.SourceBytes), s.Name, mib(lim.SourceBytes)),
				limitDetail)
			return nil, l
		}
	}
	tokens, routes := 0, 0
	var firstOver diag.Range // the name of route Routes+1
	for _, s := range srcs {
		f, ds := lang.ParseWithin(s.Name, s.Src, lang.Limits{Tokens: lim.Tokens})
		tokens += f.Tokens
		if lim.Tokens > 0 && tokens > lim.Tokens && !hasCode(ds, "E003") {
			at := diag.Pos{File: s.Name, Line: 1, Col: 1}
			ds.Add("E003", diag.Range{Start: at, End: at},
				fmt.Sprintf("the build's files hold more than %d tokens (%s brings them to %d); one build accepts at most %d", lim.Tokens, s.Name, tokens, lim.Tokens),
				limitDetail)
		}
		if hasCode(ds, "E003") {
			return nil, ds
		}
		diags = append(diags, ds...)
		files = append(files, f)
		for _, d := range f.Decls {
			if d == nil || d.Route == nil {
				continue
			}
			routes++
			if routes == lim.Routes+1 && d.Route.Name != nil {
				firstOver = d.Route.Name.Range()
			}
		}
	}
	if lim.Routes > 0 && routes > lim.Routes {
		var l diag.List
		l.Add("E003", firstOver, fmt.Sprintf("the build declares %d routes; one build accepts at most %d (this is route %d)", routes, lim.Routes, lim.Routes+1), limitDetail)
		return nil, l
	}
	return files, diags
}

func hasCode(l diag.List, code string) bool {
	for _, d := range l {
		if d.Code == code {
			return true
		}
	}
	return false
}

// mib writes a byte count as the limits are stated.
func mib(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
