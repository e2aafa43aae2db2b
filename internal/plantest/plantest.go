// Package plantest holds the test helpers that build plans and read what a
// run left behind without running anything: compiling .mqb source the way
// `mqbc run` does, plan values written by hand, input files, DLQ files.
//
// It imports nothing of the runtime, so package runtime's own tests use it
// as well as the connector packages' tests; internal/runtest adds the
// helpers that run plans.
package plantest

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	mqbc "github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/plan"
)

// Compile compiles .mqb source the way `mqbc run` does; it fails the test
// on any compile error.
func Compile(t testing.TB, src string) plan.Plan {
	t.Helper()
	p, ds := mqbc.CompileSources([]mqbc.Source{{Name: "test.mqb", Src: []byte(src)}})
	if ds.HasErrors() {
		t.Fatalf("compile:\n%v\n%s", ds, src)
	}
	return *p
}

// Logger is the logger a test run gets: errors only, everything under
// go test -v.
func Logger() *slog.Logger {
	lvl := slog.LevelError
	if testing.Verbose() {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// WriteLines writes lines to path, each ended by a newline.
func WriteLines(t testing.TB, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// WriteOrders writes n JSON lines {"order_id": "o-i", "amount": i} to path
// and returns them.
func WriteOrders(t testing.TB, path string, n int) []string {
	t.Helper()
	lines := make([]string, n)
	var b strings.Builder
	for i := range n {
		lines[i] = fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, i, i)
		b.WriteString(lines[i])
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return lines
}

// DLQLine is one envelope of a file DLQ.
type DLQLine struct {
	Error    string            `json:"error"`
	Position uint64            `json:"position"`
	Meta     map[string]string `json:"meta"`
	Payload  json.RawMessage   `json:"payload"`
}

// ReadDLQLines reads the envelopes of the DLQ file at path (none when it
// does not exist).
func ReadDLQLines(t testing.TB, path string) []DLQLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []DLQLine
	for l := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		if l == "" {
			continue
		}
		var d DLQLine
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("DLQ line %q: %v", l, err)
		}
		out = append(out, d)
	}
	return out
}

// SameIDs fails the test when got and want differ (in order too).
func SameIDs(t testing.TB, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s: got %d ids %v\nwant %d ids %v", what, len(got), got, len(want), want)
	}
}

// Str, Enum, Int and Expr are plan attribute values written by hand;
// Tmpl is a template of parts, each a literal (Lit) or an expression (Ex).
func Str(s string) plan.Value  { return plan.Value{Type: plan.TString, Str: s} }
func Enum(s string) plan.Value { return plan.Value{Type: plan.TEnum, Str: s} }
func Int(n int64) plan.Value   { return plan.Value{Type: plan.TInt, Int: n} }
func Expr(s string) plan.Value { return plan.Value{Type: plan.TExpr, Expr: s} }
func Tmpl(parts ...plan.Part) plan.Value {
	return plan.Value{Type: plan.TTemplate, Template: parts}
}
func Lit(s string) plan.Part { return plan.Part{Lit: s} }
func Ex(s string) plan.Part  { return plan.Part{Expr: s} }

// Chain links nodes in order: an edge from each to the next.
func Chain(ns []plan.Node) []plan.Edge {
	var es []plan.Edge
	for i := 1; i < len(ns); i++ {
		es = append(es, plan.Edge{From: ns[i-1].ID, To: ns[i].ID})
	}
	return es
}

// SinkPlan is one at-least-once route "publish" (concurrency 2, batch
// records a batch): the JSON lines of file input, consumed with the
// checkpoint under state, their id payload.order_id, into sink (whose ID,
// role and side it sets).
func SinkPlan(input, state string, batch int, sink plan.Node) plan.Plan {
	sink.ID, sink.Role, sink.Side = "n2", plan.RoleSink, plan.SideOutput
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "file", Attrs: map[string]plan.Value{
			"path": Str(input), "mode": Enum("consume"),
			"checkpoint_store": Str("pebble://" + state)}},
		{ID: "n1", Role: plan.RoleStep, Kind: "id", Side: plan.SideInput, Expr: "payload.order_id"},
		sink,
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{
		Name: "publish", Guarantee: plan.AtLeastOnce, Concurrency: 2, BatchSize: batch,
		Nodes: nodes, Edges: Chain(nodes)}}}
}

// BenchInput writes n JSON order lines with some padding to a file under
// b's temporary directory, returning its path and size.
func BenchInput(b *testing.B, n int) (string, int64) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "orders.jsonl")
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, `{"order_id":"o-%d","amount":%d,"body":"order number %d with some padding text"}`+"\n", i, i, i)
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return path, int64(sb.Len())
}
