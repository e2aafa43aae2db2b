package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/diag"
)

// samplePlan is a plan of n routes with every kind of value a plan holds
// and a password in a URL, so redaction shows in the written bytes.
func samplePlan(n int) Plan {
	p := Plan{Version: Version, Routes: []Route{}}
	for i := range n {
		at := diag.Pos{File: "a.mqb", Line: i + 1, Col: 3, Offset: 40 * i}
		p.Routes = append(p.Routes, Route{
			Name: "r" + strings.Repeat("x", i), Guarantee: EffectivelyOnce,
			Reasons:  []string{"write: ON CONFLICT (id) DO NOTHING", `key <a & b> "quoted"`},
			Premises: []Premise{{Kind: PremiseUniqueKey, When: CheckStartup, Node: "n1", Columns: []string{"id"}, Holds: "h", Pos: at}},
			Nodes: []Node{
				{ID: "n0", Role: RoleSource, Kind: "file", Side: SideInput, Attrs: map[string]Value{
					"path": {Type: TString, Str: "in.jsonl", Pos: at},
					"n":    {Type: TInt, Int: 3},
					"f":    {Type: TFloat, Float: 0.5},
					"l":    {Type: TList, List: []Value{{Type: TBool, Bool: true}}},
					"b": {Type: TBlock, Block: map[string]Value{"k": {Type: TExpr, Expr: "payload.a", Stable: true},
						"dsn": {Type: TString, Str: "mysql://u:hunter2@h/db?x=1"}}},
					"token": {Type: TString, Str: "hunter2", Secret: true},
				}, Pos: at},
				{ID: "n1", Role: RoleSink, Kind: "sql", Side: SideOutput, Attrs: map[string]Value{
					"url":          {Type: TString, Str: "postgres://mqb:hunter2@127.0.0.1/shop"},
					"insert_query": {Type: TTemplate, Template: []Part{{Lit: "INSERT "}, {Expr: "payload.id"}}},
				}, Children: []Branch{{Label: BranchTo, Node: Node{ID: "n2", Role: RoleSink, Kind: "file"}}}},
				{ID: "n3", Role: RoleStep, Kind: "map", Side: SideOutput, Assign: []Assignment{
					{Target: TargetMeta, Path: []string{"k"}, Value: &Value{Type: TTemplate, Secret: true, Template: []Part{{Lit: "hunter2"}}}},
				}},
			},
			Edges: []Edge{{From: "n0", To: "n1"}},
			Pos:   at,
		})
	}
	return p
}

// TestWriteJSON holds the streamed plan to the bytes encoding/json writes
// for the whole redacted plan, compact and indented, for plans of no
// route (nil and empty), one and several.
func TestWriteJSON(t *testing.T) {
	if n := reflect.TypeFor[Plan]().NumField(); n != 2 {
		t.Fatalf("Plan has %d fields: WriteJSON writes version and routes by hand, add the new one there", n)
	}
	tests := []struct {
		name string
		p    Plan
	}{
		{"nil routes", Plan{Version: Version}},
		{"no routes", samplePlan(0)},
		{"one route", samplePlan(1)},
		{"three routes", samplePlan(3)},
	}
	for _, tt := range tests {
		for _, indent := range []bool{false, true} {
			var want []byte
			var err error
			if indent {
				want, err = json.MarshalIndent(tt.p.Redacted(), "", "  ")
			} else {
				want, err = json.Marshal(tt.p.Redacted())
			}
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, '\n')
			var got bytes.Buffer
			if err := tt.p.WriteJSON(&got, indent); err != nil {
				t.Fatalf("%s, indent %v: %v", tt.name, indent, err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s, indent %v: wrote\n%s\nwant\n%s", tt.name, indent, got.Bytes(), want)
			}
			if bytes.Contains(got.Bytes(), []byte("hunter2")) {
				t.Errorf("%s, indent %v: the password is in the plan", tt.name, indent)
			}
		}
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestWriteJSONError returns the writer's error rather than a plan cut
// short without a word.
func TestWriteJSONError(t *testing.T) {
	if err := samplePlan(2).WriteJSON(failWriter{}, false); err == nil || err.Error() != "disk full" {
		t.Fatalf("err = %v, want disk full", err)
	}
}
