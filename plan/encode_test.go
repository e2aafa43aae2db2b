package plan

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/mqb-dev/mqb/diag"
)

// TestEncodedFieldCounts: appendRoute writes each field of the plan's
// types by hand, so a field added to one of them must be added there
// too (and then counted here).
func TestEncodedFieldCounts(t *testing.T) {
	for _, c := range []struct {
		typ  reflect.Type
		want int
	}{
		{reflect.TypeFor[Route](), 11},
		{reflect.TypeFor[Elision](), 5},
		{reflect.TypeFor[Premise](), 9},
		{reflect.TypeFor[Node](), 10},
		{reflect.TypeFor[Assignment](), 5},
		{reflect.TypeFor[Branch](), 3},
		{reflect.TypeFor[Edge](), 2},
		{reflect.TypeFor[Value](), 12},
		{reflect.TypeFor[Part](), 2},
		{reflect.TypeFor[diag.Pos](), 4},
	} {
		if n := c.typ.NumField(); n != c.want {
			t.Errorf("%s has %d fields, appendRoute writes %d: write the new one in encode.go", c.typ, n, c.want)
		}
	}
}

// trickyStrings are what encoding/json escapes: quotes, backslashes,
// every control character, HTML's <, > and &, invalid UTF-8 and the
// JavaScript line separators, beside plain and multi-byte text.
func trickyStrings() []string {
	s := []string{"", "plain", `"q" \ b`, "<a & b>", "\xff\xfe bad \xc3", "x\u2028y\u2029z", "héllo 世界 🎉", "\x7f"}
	ctl := make([]byte, 0, 32)
	for c := range byte(0x20) {
		ctl = append(ctl, c)
	}
	return append(s, string(ctl))
}

// TestAppendRouteMatchesMarshal holds appendRoute to json.Marshal over
// routes with every field set and left empty (nil and empty slices and
// maps told apart where encoding/json tells them apart), tricky strings
// in every string's place and floats across the formats' cut-offs.
func TestAppendRouteMatchesMarshal(t *testing.T) {
	var routes []Route
	routes = append(routes, Route{}, Route{Reasons: []string{}, Nodes: []Node{}, Edges: []Edge{}, Warnings: []string{}, Premises: []Premise{}, Elided: []Elision{}})
	routes = append(routes, samplePlan(3).Routes...)
	floats := []float64{0.5, -0.5, 1, 1e20, 1e21, 123456789e13, 1e-6, 9.99e-7, 1e-7, 2.5e-9, -3e-10, 1e100, math.SmallestNonzeroFloat64, math.MaxFloat64, math.Copysign(0, -1), 0.1 + 0.2}
	// A map of many keys: written unsorted, it would not come out in
	// order but by chance.
	many := map[string]Value{}
	for i := range 40 {
		many[string(rune('A'+i))+"k"] = Value{Type: TInt, Int: int64(i)}
	}
	routes = append(routes, Route{Nodes: []Node{{Attrs: many}}})
	for _, s := range trickyStrings() {
		at := diag.Pos{File: s, Line: 1, Col: 2, Offset: 3}
		var vals []Value
		for _, f := range floats {
			vals = append(vals, Value{Type: TFloat, Float: f})
		}
		v := Value{Type: s, Str: s, Int: -7, Float: 1.5, Bool: true, Expr: s, Stable: true, Secret: true, Pos: at,
			List:     append(vals, Value{}, Value{List: []Value{}, Block: map[string]Value{}, Template: []Part{}}),
			Block:    map[string]Value{s: {Type: TString}, "b": {}, "a" + s: {Block: map[string]Value{"z": {}, "y": {}}}},
			Template: []Part{{}, {Lit: s}, {Expr: s}, {Lit: s, Expr: s}}}
		n := Node{ID: s, Role: s, Kind: s, Side: s, Ref: s, Expr: s, Pos: at,
			Attrs:  map[string]Value{s: v, "k": {Type: TInt, Int: 1}},
			Assign: []Assignment{{Target: s, Path: []string{s, ""}, Delete: true, Value: &v, Pos: at}, {}, {Path: []string{}}},
		}
		n.Children = []Branch{{Label: s, Match: s, Node: n}, {}}
		routes = append(routes, Route{
			Name: s, Guarantee: s, Reasons: []string{s}, Warnings: []string{s, ""},
			Premises:    []Premise{{Kind: s, When: s, Node: s, Target: s, Columns: []string{s}, Key: []string{s, ""}, Holds: s, Reason: s, Pos: at}, {Key: []string{}}},
			Elided:      []Elision{{Kind: s, Key: s, By: s, Why: s, Pos: at}, {}},
			Concurrency: -1, BatchSize: math.MaxInt,
			Nodes: []Node{n, {Attrs: map[string]Value{}, Assign: []Assignment{}, Children: []Branch{}}},
			Edges: []Edge{{From: s, To: s}, {}},
			Pos:   at,
		})
	}
	for i, r := range routes {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendRoute(nil, &r)
		if err != nil {
			t.Fatalf("route %d: %v", i, err)
		}
		if string(got) != string(want) {
			t.Errorf("route %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestAppendRouteRefusesNaN: as json.Marshal does, a float that JSON
// cannot hold is an error, not a plan that does not read back.
func TestAppendRouteRefusesNaN(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		r := Route{Nodes: []Node{{Attrs: map[string]Value{"f": {Type: TFloat, Float: f}}}}}
		if _, err := appendRoute(nil, &r); err == nil {
			t.Errorf("%v: no error", f)
		}
	}
}
