// Package compiler turns parsed .mqb files into a plan.Plan: it resolves
// route structure and refs, checks every attribute against stdlib, compiles
// every expression and ${…} placeholder with expr-lang's checker, works out
// which values are stable across replays, proves each route's delivery
// guarantee with human-readable reasons, and emits the plan the runtime
// executes. Every finding is a diag.Diagnostic collected in one list; checking
// goes on after an error so one build reports every mistake.
//
// The stages live in their own files, in the order they run:
// resolve.go (route structure, kinds, refs), attrs.go (attribute types and
// defaults), exprs.go (expr-lang compilation), stability.go (stable versus
// per-delivery values), sqlconflict.go (SQL conflict clauses), prove.go (the
// guarantee proof) and emit.go (plan nodes and edges).
package compiler

import (
	"fmt"
	"sort"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

// Source is one named .mqb file to parse and compile.
type Source struct {
	Name string
	Src  []byte
}

// CompileSources parses every source and compiles the result, within
// DefaultLimits (limits.go). Files are compiled in the order given; parse
// errors do not stop checking of the declarations that did parse.
func CompileSources(srcs []Source) (*plan.Plan, diag.List) {
	return CompileSourcesWithin(srcs, DefaultLimits)
}

// Compile checks the files and builds the plan. The plan is returned even
// when there are errors (with the routes that could be built), so tools such
// as an editor can show verdicts; a caller that executes it must first check
// diags.HasErrors().
func Compile(files []*lang.File) (*plan.Plan, diag.List) {
	n := 0
	for _, f := range files {
		if f != nil {
			n += len(f.Decls)
		}
	}
	p := &plan.Plan{Version: plan.Version, Routes: make([]plan.Route, 0, n)}
	diags := compileEach(files, false, func(r *plan.Route) { p.Routes = append(p.Routes, *r) })
	return p, diags
}

// compileEach checks the files and hands each route that could be built
// to emit, in file order; the diagnostics come once every route is
// checked. With drop, each route's declaration is cut from its file once
// compiled, so its syntax tree can be collected: what the other routes
// read of the whole file (its create_table statements, its named
// endpoints) is collected first.
func compileEach(files []*lang.File, drop bool, emit func(*plan.Route)) diag.List {
	c := &compiler{endpoints: map[string]*namedEndpoint{}, routeNames: map[string]diag.Range{}, exprs: newExprChecker(), partDirs: map[string]partDirUse{}, filePaths: map[string]filePathUse{}}
	c.collectEndpoints(files)
	c.checkKeyPaths(files)
	for _, f := range files {
		if f == nil {
			continue
		}
		if drop {
			(&routeCtx{c: c, file: f}).fileCreateTables()
		}
		for i, d := range f.Decls {
			if d == nil || d.Route == nil {
				continue
			}
			if r := c.compileRoute(f, d.Route); r != nil {
				emit(r)
			}
			if drop {
				f.Decls[i] = nil
			}
		}
	}
	c.checkUnusedEndpoints()
	diags := dedupe(c.diags)
	diags.Sort()
	return diags
}

// compiler holds state across the files of one build.
type compiler struct {
	diags      diag.List
	endpoints  map[string]*namedEndpoint
	routeNames map[string]diag.Range
	exprs      *exprChecker
	// partDirs maps each directory or prefix a sink writes positional
	// parts into to its first writer (E051).
	partDirs map[string]partDirUse
	// filePaths maps each path a file sink writes to its first writer
	// (E053).
	filePaths map[string]filePathUse
	// stdinRoute is the route that reads stdin, which only one can.
	stdinRoute string
	// misplaced are the items whose key is a path (or a del) outside a
	// map block: E028 reported them, and the checks of their blocks skip
	// them.
	misplaced map[*lang.Item]bool
	// fileDDLs are the create_table statements of each file by url
	// (fileCreateTables), collected on first use.
	fileDDLs map[*lang.File]map[string][]string
}

// namedEndpoint is an `output NAME = kind { … }` or `input NAME = …`
// declaration, checked where it is used.
type namedEndpoint struct {
	decl *lang.NamedEndpoint
	file *lang.File
	used bool
}

func (c *compiler) errorCount() int {
	n := 0
	for _, d := range c.diags {
		if d.Severity == diag.Error {
			n++
		}
	}
	return n
}

func (c *compiler) add(code string, r diag.Range, summary, detail string) {
	c.diags.Add(code, r, summary, detail)
}

func (c *compiler) collectEndpoints(files []*lang.File) {
	for _, f := range files {
		if f == nil {
			continue
		}
		for _, d := range f.Decls {
			if d == nil || d.Endpoint == nil || d.Endpoint.Name == nil {
				continue
			}
			name := d.Endpoint.Name.Name
			if prev, ok := c.endpoints[name]; ok {
				c.add("E023", d.Endpoint.Name.Range(), fmt.Sprintf("endpoint %q is declared twice", name),
					fmt.Sprintf("The first declaration is at %s.", lang.Range(prev.decl.Pos, prev.decl.Pos).Start))
				continue
			}
			c.endpoints[name] = &namedEndpoint{decl: d.Endpoint, file: f}
		}
	}
}

// checkUnusedEndpoints checks named endpoints no route uses, so their
// mistakes are reported too.
func (c *compiler) checkUnusedEndpoints() {
	names := make([]string, 0, len(c.endpoints))
	for n := range c.endpoints {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ne := c.endpoints[n]
		if ne.used || ne.decl.Kind == nil {
			continue
		}
		rc := &routeCtx{c: c, file: ne.file, name: ne.decl.Dir + " " + n, inNamedUnused: true, taint: newTaint(), expanding: []string{n}}
		role := roleSink
		if ne.decl.Dir == "input" {
			role = roleSource
		}
		rc.checkKindBody(ne.decl.Kind, ne.decl.Body, role, n, lang.Range(ne.decl.Pos, ne.decl.EndPos))
	}
}

// dedupe drops diagnostics repeated at one position with one text: a named
// endpoint used by several routes is checked once per use.
func dedupe(l diag.List) diag.List {
	seen := make(map[string]bool, len(l))
	out := l[:0:0]
	for _, d := range l {
		k := fmt.Sprint(d.Range.Start.File, d.Range.Start.Offset, d.Code, d.Summary)
		if !seen[k] {
			seen[k] = true
			out = append(out, d)
		}
	}
	return out
}

// kindNames and stepNames feed "did you mean".
var (
	kindNames = stdlib.KindNames()
	stepNames = stdlib.StepNames()
)
