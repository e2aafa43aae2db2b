package compiler

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/mqb-dev/mqb/internal/genroutes"
	"github.com/mqb-dev/mqb/plan"
)

// buildCases are the sources of every golden case (with its limits),
// every example and generated routes: what a build meets.
func buildCases(t *testing.T) map[string]struct {
	srcs []Source
	lim  Limits
} {
	t.Helper()
	cases := map[string]struct {
		srcs []Source
		lim  Limits
	}{}
	goldens, _ := filepath.Glob("../testdata/check/*.txtar")
	for _, path := range goldens {
		ar, err := txtar.ParseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var srcs []Source
		for _, f := range ar.Files {
			if strings.HasSuffix(f.Name, ".mqb") {
				srcs = append(srcs, Source{Name: f.Name, Src: f.Data})
			}
		}
		cases[filepath.Base(path)] = struct {
			srcs []Source
			lim  Limits
		}{srcs, goldenLimits(ar)}
	}
	examples, _ := filepath.Glob("../examples/*/*.mqb")
	for _, path := range examples {
		if filepath.Base(path) == ".mqb" {
			continue // a route's state directory, left by running the example
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cases[path] = struct {
			srcs []Source
			lim  Limits
		}{[]Source{{Name: path, Src: b}}, DefaultLimits}
	}
	cases["generated"] = struct {
		srcs []Source
		lim  Limits
	}{[]Source{{Name: "gen.mqb", Src: genroutes.Routes(60)}}, DefaultLimits}
	if len(goldens) < 20 || len(examples) < 5 {
		t.Fatalf("%d golden cases and %d examples: the sources are missing", len(goldens), len(examples))
	}
	return cases
}

// TestCompileSourcesToMatchesPlan: the routes CompileSourcesTo hands on
// one by one, letting go of each route's syntax as it goes, are the
// plan's routes, and its diagnostics the plan's, for every golden case,
// example and generated file; and the plan written a route at a time is
// the bytes of json.Marshal (and MarshalIndent) of the redacted plan.
func TestCompileSourcesToMatchesPlan(t *testing.T) {
	for name, c := range buildCases(t) {
		want, wantDiags := CompileSourcesWithin(c.srcs, c.lim)
		var got []plan.Route
		diags := CompileSourcesTo(c.srcs, c.lim, func(r *plan.Route) { got = append(got, *r) })
		if !reflect.DeepEqual(diags, wantDiags) {
			t.Errorf("%s: diagnostics\n%v\nwant\n%v", name, diags, wantDiags)
		}
		if len(got) != len(want.Routes) || len(got) > 0 && !reflect.DeepEqual(got, want.Routes) {
			t.Errorf("%s: %d routes handed on differ from the plan's %d", name, len(got), len(want.Routes))
		}
		for _, indent := range []bool{false, true} {
			var b bytes.Buffer
			pw := plan.NewWriter(&b, plan.Version, indent)
			for _, r := range got {
				if err := pw.Route(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := pw.Close(); err != nil {
				t.Fatal(err)
			}
			var j []byte
			var err error
			if indent {
				j, err = json.MarshalIndent(want.Redacted(), "", "  ")
			} else {
				j, err = json.Marshal(want.Redacted())
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Bytes(), append(j, '\n')) {
				t.Errorf("%s, indent %v: the plan written route by route is not json.Marshal's", name, indent)
			}
		}
	}
}

// TestCompileSourcesToRestoresGC: the build holds off the collector while
// it parses and gives the process back the setting it found, whether the
// build went through or stopped at a bound.
func TestCompileSourcesToRestoresGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(73))
	src := genroutes.Routes(3)
	for _, lim := range []Limits{DefaultLimits, {Routes: 1}} {
		CompileSourcesTo([]Source{{Name: "gen.mqb", Src: src}}, lim, func(*plan.Route) {})
		if got := debug.SetGCPercent(73); got != 73 {
			t.Errorf("limits %+v: GC percent %d after the build, want 73", lim, got)
		}
	}
}
