// Package plantest holds the test helpers that build plans and read what a
// run left behind without running anything: compiling .mqb source the way
// `mqbc run` does, plan values written by hand, input files, DLQ files.
//
// It imports nothing of the runtime, so package runtime's own tests use it
// as well as the connector packages' tests; internal/runtest adds the
// helpers that run plans.
package plantest

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// FileIDs returns payload field "id" of every JSON line in path, sorted
// (nil when the file does not exist).
func FileIDs(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var v struct {
			ID      any             `json:"id"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		if v.ID == nil && v.Payload != nil { // a DLQ envelope
			if err := json.Unmarshal(v.Payload, &v); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, fmt.Sprint(v.ID))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(ids)
	return ids
}

// SeqIDs are prefix followed by from..to in three digits, sorted.
func SeqIDs(prefix string, from, to int) []string {
	var ids []string
	for i := from; i <= to; i++ {
		ids = append(ids, fmt.Sprintf("%s%03d", prefix, i))
	}
	sort.Strings(ids)
	return ids
}

// IDAmountLines are the JSON lines {"id":"<prefix>NNN","amount":N} for N
// from from to to.
func IDAmountLines(prefix string, from, to int) []string {
	var lines []string
	for i := from; i <= to; i++ {
		lines = append(lines, fmt.Sprintf(`{"id":"%s%03d","amount":%d}`, prefix, i, i))
	}
	return lines
}

// SinkNodeID returns the ID of route r's sink node.
func SinkNodeID(t testing.TB, r plan.Route) string {
	t.Helper()
	for _, n := range r.Nodes {
		if n.Role == plan.RoleSink {
			return n.ID
		}
	}
	t.Fatal("no sink node")
	return ""
}

// WithPremise adds a premise about route 0's sink.
func WithPremise(t testing.TB, p plan.Plan, pr plan.Premise) plan.Plan {
	t.Helper()
	if pr.Node == "" {
		pr.Node = SinkNodeID(t, p.Routes[0])
	}
	if pr.Holds == "" {
		pr.Holds = fmt.Sprintf("%s %s on (%s)", pr.Kind, pr.Target, strings.Join(pr.Columns, ", "))
	}
	if pr.Reason == "" {
		pr.Reason = "write: the conflict clause absorbs a replay"
	}
	p.Routes[0].Premises = append(p.Routes[0].Premises, pr)
	return p
}

// Counts are a route's counts InsertedExisted checks: records read,
// delivered, and dead-lettered or failed.
type Counts struct{ In, Out, Failed int64 }

// InsertedExisted is the spec's insert-vs-duplicate branch, run twice
// in dir: first o001..o040, then o031..o050 with o045 repeated and bad, a
// record the call fails. compile gives the route upsert_branch reading the
// named input file; the route's switch writes the inserted records to
// new.jsonl, the existing ones to existed.jsonl and the rest to
// unrouted.jsonl. It checks both runs' stats and the inserted and existed
// files; the caller checks unrouted.jsonl and the store. run runs a plan
// in dir and returns upsert_branch's counts.
func InsertedExisted(t *testing.T, dir string, compile func(input string) plan.Plan, bad string, run func(dir string, p plan.Plan) Counts) {
	t.Helper()
	WriteLines(t, filepath.Join(dir, "first.jsonl"), IDAmountLines("o", 1, 40)...)
	st := run(dir, compile("first.jsonl"))
	if st.In != 40 || st.Out != 40 {
		t.Errorf("first run %+v, want in 40 out 40", st)
	}
	SameIDs(t, "first run: inserted", FileIDs(t, filepath.Join(dir, "new.jsonl")), SeqIDs("o", 1, 40))
	SameIDs(t, "first run: existed", FileIDs(t, filepath.Join(dir, "existed.jsonl")), nil)

	second := append(IDAmountLines("o", 31, 50), `{"id":"o045","amount":45}`, bad)
	WriteLines(t, filepath.Join(dir, "second.jsonl"), second...)
	st = run(dir, compile("second.jsonl"))
	if st.In != 22 || st.Out != 22 || st.Failed != 0 {
		t.Errorf("second run %+v, want in 22 out 22", st)
	}
	SameIDs(t, "inserted", FileIDs(t, filepath.Join(dir, "new.jsonl")), SeqIDs("o", 1, 50))
	SameIDs(t, "existed", FileIDs(t, filepath.Join(dir, "existed.jsonl")), append(SeqIDs("o", 31, 40), "o045"))
}

// Env is the set of paths a test pipeline uses, all under one temporary
// directory.
type Env struct {
	Dir, Input, DB, DLQ, State, Dedup, Parts string
}

// NewEnv lays out an Env under a fresh temporary directory of t.
func NewEnv(t testing.TB) Env {
	d := t.TempDir()
	return Env{Dir: d, Input: filepath.Join(d, "orders.jsonl"), DB: filepath.Join(d, "orders.db"),
		DLQ: filepath.Join(d, "dlq.jsonl"), State: filepath.Join(d, "state"), Dedup: filepath.Join(d, "dedup"),
		Parts: filepath.Join(d, "parts")}
}

// DLQFile is a dlq step whose branch writes to the file at path, named by
// nameBy (the file sink's default when "").
func DLQFile(id, path, nameBy string) plan.Node {
	attrs := map[string]plan.Value{"path": Str(path)}
	if nameBy != "" {
		attrs["name_by"] = Enum(nameBy)
	}
	return plan.Node{ID: id, Role: plan.RoleStep, Kind: "dlq", Side: plan.SideOutput, Children: []plan.Branch{{
		Label: plan.BranchTo, Node: plan.Node{ID: id + ".0", Role: plan.RoleSink, Kind: "file", Attrs: attrs}}}}
}

// WithRetryAt inserts a retry step (backoff 100ms up to 1s) at index at of
// the first route's nodes.
func WithRetryAt(p plan.Plan, at int, attempts int64) plan.Plan {
	retry := plan.Node{ID: "r", Role: plan.RoleStep, Kind: "retry", Side: plan.SideOutput, Attrs: map[string]plan.Value{
		"attempts": Int(attempts), "backoff": {Type: plan.TDuration, Str: "100ms", Int: int64(100 * time.Millisecond)},
		"max_backoff": {Type: plan.TDuration, Str: "1s", Int: int64(time.Second)}}}
	nodes := p.Routes[0].Nodes
	p.Routes[0].Nodes = append(append(nodes[:at:at], retry), nodes[at:]...)
	p.Routes[0].Edges = Chain(p.Routes[0].Nodes)
	return p
}

// FirstWrite is a writer that calls f once, with the first text written
// to it (trimmed): a run's Progress, to act when the run is under way.
func FirstWrite(f func(text string)) io.Writer {
	var once sync.Once
	return writerFunc(func(b []byte) (int, error) {
		once.Do(func() { f(strings.TrimSpace(string(b))) })
		return len(b), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// CheckRefused fails the test unless err, a run's error, names every one
// of names and shows none of secrets.
func CheckRefused(t testing.TB, err error, names []string, secrets ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the run succeeded, want an error naming %q", names)
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("err %v shows %q", err, s)
		}
	}
	for _, name := range names {
		if !strings.Contains(err.Error(), name) {
			t.Fatalf("err %v, want it to name %q", err, name)
		}
	}
	t.Log(err)
}

// SQLQuery runs query on a fresh database/sql connection (driver, dsn)
// and hands its rows to scan.
func SQLQuery[T any](t *testing.T, driver, dsn, query string, scan func(*testing.T, Rows) T) T {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	return scan(t, rows)
}

// PGQuery runs query on a fresh connection to the PostgreSQL server at url
// and hands its rows to scan.
func PGQuery[T any](t *testing.T, url, query string, scan func(*testing.T, Rows) T) T {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	return scan(t, rows)
}

// FileRoute is a route named name from file in (its checkpoint under
// state) through steps to file out, written by time, with its dead
// letters in file dlq when dlq is not "": at concurrency 1, in batches of
// 3.
func FileRoute(name, in, out, dlq, state string, steps ...plan.Node) plan.Plan {
	nodes := []plan.Node{{ID: "n0", Role: plan.RoleSource, Kind: "file", Attrs: map[string]plan.Value{
		"path": Str(in), "checkpoint_store": Str("pebble://" + state)}}}
	nodes = append(nodes, steps...)
	if dlq != "" {
		nodes = append(nodes, plan.Node{ID: "dlq", Role: plan.RoleStep, Kind: "dlq", Side: plan.SideOutput,
			Children: []plan.Branch{{Label: plan.BranchTo, Node: plan.Node{Role: plan.RoleSink, Kind: "file",
				Attrs: map[string]plan.Value{"path": Str(dlq)}}}}})
	}
	nodes = append(nodes, plan.Node{ID: "out", Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{
		"path": Str(out), "name_by": Enum("write_time")}})
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: name, Concurrency: 1, BatchSize: 3, Nodes: nodes}}}
}

// ReadLines reads the lines of the file at path (nil for an empty file).
func ReadLines(t testing.TB, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(string(data), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// SQLitePlan is the route orders: the JSON lines of file input (its
// checkpoint under state) → id payload.order_id → dedup (its keys under
// dedup) → dlq to file dlq → the SQLite database db, INSERT … ON CONFLICT
// (id) DO NOTHING into table orders.
func SQLitePlan(input, state, dedup, dlq, db string, batch, concurrency int) plan.Plan {
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "file", Side: plan.SideInput, Attrs: map[string]plan.Value{
			"path": Str(input), "mode": Enum("consume"), "format": Enum("json"),
			"checkpoint_store": Str("pebble://" + state), "max_record_bytes": Int(MaxRecordBytes)}},
		{ID: "n1", Role: plan.RoleStep, Kind: "id", Side: plan.SideInput, Expr: "payload.order_id"},
		{ID: "n2", Role: plan.RoleStep, Kind: "dedup", Side: plan.SideInput, Attrs: map[string]plan.Value{
			"key": Expr(`meta["mqb.id"]`), "store": Str("pebble://" + dedup),
			"ttl": {Type: plan.TDuration, Str: "1h", Int: int64(3600e9)}}},
		DLQFile("n3", dlq, "write_time"),
		{ID: "n4", Role: plan.RoleSink, Kind: "sql", Side: plan.SideOutput, Attrs: map[string]plan.Value{
			"url":          Tmpl(Lit("sqlite://" + db)),
			"create_table": Str(`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL, body TEXT)`),
			"insert_query": Tmpl(Lit("INSERT INTO orders (id, amount, body) VALUES ("), Ex(`meta["mqb.id"]`),
				Lit(", "), Ex("payload.amount"), Lit(", "), Ex("payload.body"), Lit(") ON CONFLICT (id) DO NOTHING")),
		}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{
		Name: "orders", Guarantee: plan.EffectivelyOnce, Concurrency: concurrency, BatchSize: batch,
		Nodes: nodes, Edges: Chain(nodes)}}}
}

// SQLServerPlan is SQLitePlan writing to the server at url instead:
// table orders made by ddl, the insert ending in conflict, without the
// dedup step unless withDedup.
func SQLServerPlan(input, state, dedup, dlq, url, ddl, conflict string, batch, concurrency int, withDedup bool) plan.Plan {
	p := SQLitePlan(input, state, dedup, dlq, "", batch, concurrency)
	nodes := p.Routes[0].Nodes
	sink := &nodes[len(nodes)-1]
	sink.Attrs = map[string]plan.Value{
		"url":          Tmpl(Lit(url)),
		"create_table": Str(ddl),
		"insert_query": Tmpl(Lit("INSERT INTO orders (id, amount, body) VALUES ("), Ex(`meta["mqb.id"]`),
			Lit(", "), Ex("payload.amount"), Lit(", "), Ex("payload.body"), Lit(") "+conflict)),
	}
	if !withDedup {
		nodes = append(nodes[:2:2], nodes[3:]...)
	}
	p.Routes[0].Nodes = nodes
	p.Routes[0].Edges = Chain(nodes)
	return p
}

// CountLines counts the lines of path (0 while it does not exist): for a
// wait on a file a route is still writing.
func CountLines(path string) int {
	data, _ := os.ReadFile(path)
	return bytes.Count(data, []byte{'\n'})
}
