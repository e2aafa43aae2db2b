package compiler

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/expr-lang/expr/builtin"
	"golang.org/x/tools/txtar"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

func TestSuggest(t *testing.T) {
	tests := []struct{ name, want string }{
		{"sqll", "sql"}, {"fil", "file"}, {"dedupe", "dedup"}, {"pth", "path"}, {"zzzzzzz", ""},
	}
	cands := []string{"sql", "file", "dedup", "path", "kafka"}
	for _, tt := range tests {
		if got := suggest(tt.name, cands); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestStability checks the stability verdicts of expressions per source.
func TestStability(t *testing.T) {
	const file = `file { path = "a" }`
	const kafka = `kafka { url = "k:9092", topic = "t" }`
	const nats = `nats { url = "nats://h", subject = "s" }`
	tests := []struct {
		source, steps, key string
		stable             bool
		code               string // a diagnostic the case must report
	}{
		{file, "", "payload.id", true, ""},
		{file, "", "message_id", false, "W001"},
		{kafka, "", "message_id", true, ""},
		{nats, "", "message_id", true, ""},
		{`nats { url = "nats://h", subject = "s", no_jetstream = true }`, "", "message_id", false, "W001"},
		{kafka, "", `meta["mqb.src.offset"]`, true, ""},
		{kafka, "", `meta["mqb.src.partition"] + "-" + meta["mqb.src.offset"]`, true, ""},
		{nats, "", `meta["mqb.src.stream_sequence"]`, true, ""},
		{`nats { url = "nats://h", subject = "s", no_jetstream = true }`, "", `meta["mqb.src.stream_sequence"]`, false, "E050"},
		{file, "", `meta["mqb.src.offset"]`, false, "E050"},
		{`file { path = "a", mode = subscribe }`, "", `meta["mqb.src.offset"]`, false, "E050"},
		{kafka, "", `meta["mqb.src.nope"]`, false, "E050"},
		{`postgres_cdc { url = "postgres://x", publication = "p", slot_name = "s" }`, "", `meta["postgres.lsn"]`, true, ""},
		{file, "", `meta["postgres.lsn"]`, false, "W001"},
		{file, "id payload.id", `meta["mqb.id"]`, true, ""},
		{file, "id message_id", `meta["mqb.id"]`, false, "W001"},
		{file, "", `string(now())`, false, "W001"},
		{file, "", `env("X") + payload.a`, true, "W021"},
		{file, "", `meta["other"]`, false, "W001"},
		{file, "map { id = string(now()) }", `payload.id`, false, "W001"},
		{file, "map { id = payload.x }", `payload.id`, true, ""},
		// map paths: a read is tainted by a write at, above or below it
		{file, "map { payload.k.id = string(now()) }", `payload.k.id`, false, "W001"},
		{file, "map { payload.k.id = string(now()) }", `payload["k"].id`, false, "W001"},
		{file, "map { payload.k.id = string(now()) }", `toJSON(payload.k)`, false, "W001"},
		{file, "map { payload.k.id = string(now()) }", `toJSON(payload)`, false, "W001"},
		{file, "map { payload.k.id = string(now()) }", `payload.k.other`, true, ""},
		{file, "map { payload.k.id = string(now()) }", `payload.kk`, true, ""},
		{file, "map { payload.k = {\"id\": string(now())} }", `payload.k.id`, false, "W001"},
		{file, "map { payload.k = {\"id\": payload.id} }", `payload.k.id`, true, ""},
		{file, "map { payload.items = [string(now())] }", `payload.items[0]`, false, "W001"},
		{file, "map { payload.k.id = lower(payload.id) }", `payload.k.id`, true, ""},
		{file, "map { payload.k.id = string(now()) }\n map { del payload.k.id }", `toJSON(payload)`, true, ""},
		{file, "map { payload.k.id = string(now()) }\n map { del payload.k }", `payload.k.id`, true, ""},
		{file, "map { del payload.k }\n map { payload.k.id = string(now()) }", `toJSON(payload.k)`, false, "W001"},
		{file, "map { payload = {\"line\": string(now())} }", `payload.id`, false, "W001"},
		{file, "map { payload = {\"id\": payload.x} }", `payload.id`, true, ""},
		{file, "map { payload = {\"id\": string(now())} }\n map { payload.id = payload.x }", `payload.id`, false, "W001"},
		{file, "map { payload = {\"id\": string(now())} }\n map { payload.id = \"fixed\" }", `payload.id`, true, ""},
		{file, "map { payload = {\"id\": env(\"X\")} }", `payload.id`, true, "W021"},
		{file, "map { payload.a = string(now()), b = payload.a }", `payload.b`, true, ""},
		{file, "map { meta[\"t\"] = payload.t }", `meta["t"]`, true, ""},
		{file, "map { meta[\"t\"] = string(now()) }", `meta["t"]`, false, "W001"},
		{file, "map { meta.t = payload.t }", `meta["t"] + meta["u"]`, false, "W001"},
		{file, "map { del meta[\"t\"] }", `meta["t"]`, true, ""},
		{file, "map { meta[\"mqb.id\"] = payload.t }", `payload.t`, false, "E029"},
		{file, "map { payload.a.b = 1, payload.a = 2 }", `payload.t`, false, "E018"},
		{`file { path = "a", format = text }`, "parse { format = json }\n map { payload = {\"line\": string(now())} }\n map { payload = {\"id\": \"x\"} }", `payload.id`, true, ""},
		// the allow-list: expr-lang's $env in any form, map order, unknown constructs
		{file, "", `T:$env.message_id`, false, ""},
		{file, "", `T:$env["payload"].id`, false, ""},
		{file, "", `T:get($env, "payload").id`, false, ""},
		{file, "", `T:$env`, false, ""},
		{file, "", `string(keys(payload)[0])`, false, "W001"},
		{file, "", `join(values(payload.tags), ",")`, false, "W001"},
		{file, "", `toJSON(toPairs(payload))`, false, "W001"},
		{file, "", `join(sort(keys(payload)), ",")`, true, ""},
		{file, "", `string(len(keys(payload)))`, true, ""},
		{file, "", `"a" in keys(payload) ? "y" : "n"`, true, ""},
		{file, "", `get(meta, "mqb.id")`, false, "W001"},
		{file, "", `meta[payload.k]`, false, "W001"},
		{file, "", `upper(trim(payload.id)) + "-" + string(payload.n * 2)`, true, ""},
		{file, "", `toJSON(payload)`, true, ""},
		{file, "", `T:let x = payload.id; x + "-" + x`, true, ""},
		{file, "", `T:let x = now(); string(x)`, false, ""},
		{file, "", `T:payload.id`, true, ""},
		{file, "", `T:message_id`, false, ""},
		{file, "", `join(map(payload.items, .sku), ",")`, true, ""},
		{file, "", `join(map(payload.items, string(now())), ",")`, false, "W001"},
		{file, "", `payload?.a ?? payload.b`, true, ""},
		{file, "", `string(date(payload.ts))`, true, "W021"},
	}
	for _, tt := range tests {
		// T: cases are ${…} placeholders (the only place the lexer lets
		// expr-lang's $env and `;` through), checked as a mongodb id_field.
		src := fmt.Sprintf("route r {\n from %s\n %s\n dedup { key = %s }\n to nats { url = \"nats://h\", subject = \"s\" }\n}\n", tt.source, tt.steps, tt.key)
		tmpl, isTmpl := strings.CutPrefix(tt.key, "T:")
		if isTmpl {
			src = fmt.Sprintf("route r {\n from %s\n %s\n to mongodb { url = \"mongodb://h\", database = \"d\", collection = \"c\", id_field = \"${%s}\" }\n}\n",
				tt.source, tt.steps, strings.ReplaceAll(tmpl, `"`, `\"`))
		}
		p, diags := CompileSources([]Source{{"t.mqb", []byte(src)}})
		var codes []string
		for _, d := range diags {
			codes = append(codes, d.Code)
		}
		if tt.code != "" && !slices.Contains(codes, tt.code) {
			t.Errorf("%s: want %s, got %v", src, tt.code, diags)
		}
		if diags.HasErrors() {
			if tt.code == "" || !strings.HasPrefix(tt.code, "E") {
				t.Errorf("%s: unexpected errors %v", src, diags)
			}
			continue
		}
		var got *plan.Value
		for _, n := range p.Routes[0].Nodes {
			if n.Kind == "dedup" || (isTmpl && n.Kind == "mongodb") {
				v := n.Attrs["key"]
				if isTmpl {
					v = n.Attrs["id_field"]
				}
				got = &v
			}
		}
		if got == nil || got.Stable != tt.stable {
			t.Errorf("key %s after %q from %s: stable = %v, want %v (%v)", tt.key, tt.steps, tt.source, got != nil && got.Stable, tt.stable, diags)
		}
	}
}

// TestEveryBuiltinIsClassified keeps the stability allow-list honest when
// expr-lang grows: each of its builtins is either on the deterministic
// list or named as per-delivery or map-ordered, so a new builtin is a
// test failure to review rather than a silent guess.
func TestEveryBuiltinIsClassified(t *testing.T) {
	for _, name := range builtin.Names {
		_, det := stdlib.DeterministicFuncs[name]
		if !det && !slices.Contains(stdlib.PerDeliveryFuncs, name) && !slices.Contains(stdlib.MapOrderFuncs, name) {
			t.Errorf("expr-lang builtin %s() is not classified in stdlib (DeterministicFuncs, PerDeliveryFuncs or MapOrderFuncs)", name)
		}
	}
}

// TestPlanDefaultsAndTypes checks that the plan carries every declared
// attribute, typed.
func TestPlanDefaultsAndTypes(t *testing.T) {
	src := `route r {
  concurrency = 2
  from file { path = "a.jsonl" }
  dedup { key = "${payload:order_id}", ttl = 90m }
  retry {}
  to sql { url = "sqlite://a.db", insert_query = "INSERT INTO t (id) VALUES (${payload:id}) ON CONFLICT (id) DO NOTHING" }
}`
	p, diags := CompileSources([]Source{{"t.mqb", []byte(src)}})
	if len(diags) != 0 {
		t.Fatalf("diags: %v", diags)
	}
	r := p.Routes[0]
	if r.Concurrency != 2 || r.BatchSize != 1024 || r.Guarantee != plan.EffectivelyOnce {
		t.Fatalf("route = %+v", r)
	}
	if len(r.Nodes) != 4 || len(r.Edges) != 3 {
		t.Fatalf("nodes %d edges %d", len(r.Nodes), len(r.Edges))
	}
	dedup := r.Nodes[1].Attrs
	if v := dedup["ttl"]; v.Type != plan.TDuration || v.Int != int64(90*60e9) || v.Str != "90m" {
		t.Errorf("ttl = %+v", v)
	}
	if v := dedup["key"]; v.Type != plan.TExpr || v.Expr != "payload.order_id" || !v.Stable {
		t.Errorf("key = %+v", v)
	}
	if v := dedup["store"]; v.Type != plan.TString || v.Str != "pebble://.mqb/dedup" {
		t.Errorf("store = %+v", v)
	}
	retry := r.Nodes[2]
	if retry.Side != plan.SideOutput || retry.Attrs["attempts"].Int != 5 || retry.Attrs["backoff"].Int != 100e6 {
		t.Errorf("retry = %+v", retry)
	}
	iq := r.Nodes[3].Attrs["insert_query"]
	if iq.Type != plan.TTemplate || len(iq.Template) != 3 || iq.Template[1].Expr != "payload.id" {
		t.Errorf("insert_query = %+v", iq)
	}
	if v := r.Nodes[3].Attrs["bulk_copy"]; v.Type != plan.TBool || v.Bool {
		t.Errorf("bulk_copy = %+v", v)
	}
}

// TestExamples builds every examples/**/*.mqb; they must have no errors.
func TestExamples(t *testing.T) {
	var files []string
	_ = filepath.WalkDir("../examples", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".mqb") {
			files = append(files, path)
		}
		return nil
	})
	if len(files) == 0 {
		t.Skip("no examples/**/*.mqb yet")
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, diags := CompileSources([]Source{{f, b}})
			if diags.HasErrors() {
				var sb strings.Builder
				diag.WriteText(&sb, diags, diag.Sources{f: b})
				t.Errorf("%s does not build:\n%s", f, sb.String())
			}
		})
	}
}

// FuzzCompile: any input gives diagnostics, never a panic.
func FuzzCompile(f *testing.F) {
	paths, _ := filepath.Glob("../testdata/check/*.txtar")
	for _, p := range paths {
		ar, err := txtar.ParseFile(p)
		if err != nil {
			continue
		}
		for _, file := range ar.Files {
			if strings.HasSuffix(file.Name, ".mqb") {
				f.Add(file.Data)
			}
		}
	}
	for i := range 64 {
		f.Add(pieceRoute(uint64(i) * 0x9e3779b97f4a7c15))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, diags := CompileSources([]Source{{"fuzz.mqb", src}})
		if p == nil {
			t.Fatal("nil plan")
		}
		for _, d := range diags {
			if d.Code == "" || d.Summary == "" {
				t.Fatalf("diagnostic without code or summary: %+v", d)
			}
		}
		// The property: a route built from random pieces is never claimed
		// effectively- or exactly-once while a key depends on now(),
		// message_id of a file source, expr-lang's $env or an unknown
		// function. The fuzzer's bytes also pick the pieces.
		if len(src) >= 8 {
			checkPieceRoute(t, binary.LittleEndian.Uint64(src[:8]))
		}
	})
}

// Pieces of a route for the fuzz property. Each key piece says whether it
// is one the prover must never trust.
var (
	fuzzSources = []string{
		`file { path = "in.jsonl" }`,
		`file { path = "in.jsonl", mode = group_subscribe }`,
		`kafka { url = "127.0.0.1:9092", topic = "t" }`,
		`nats { url = "nats://h", subject = "s", stream = "S", durable = "d" }`,
	}
	fuzzKeys = []struct {
		expr      string
		untrusted bool // now(), message_id of a file, $env, an unknown function
		fileOnly  bool // untrusted only over a file source
	}{
		{`payload.order_id`, false, false},
		{`string(now())`, true, false},
		{`payload.order_id + string(now().Unix())`, true, false},
		{`message_id`, true, true},
		{`upper(message_id)`, true, true},
		{`$env.message_id`, true, false},
		{`string(get($env, "payload").id)`, true, false},
		{`keys(payload)[0]`, true, false},
		{`join(values(payload), "-")`, true, false},
		{`string(payload.order_id).Foo()`, true, false},
		{`lower(trim(payload.order_id))`, false, false},
		{`join(sort(keys(payload)), ",")`, false, false},
	}
)

// pieceRoute builds one route from the pieces seed picks: a key used as
// the id, a dedup key or a sink key (SQL conflict column, Mongo id_field).
func pieceRoute(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	src := fuzzSources[r.IntN(len(fuzzSources))]
	k := fuzzKeys[r.IntN(len(fuzzKeys))]
	tmpl := strings.ReplaceAll(k.expr, `"`, `\"`)
	var body string
	switch r.IntN(4) {
	case 0: // the key is the id, read by a SQL conflict column
		body = "  ${ID}\n  to sql { url = \"sqlite://o.db\", insert_query = \"INSERT INTO t (id) VALUES (${meta[\\\"mqb.id\\\"]}) ON CONFLICT (id) DO NOTHING\" }\n"
	case 1: // the key binds the conflict column directly
		body = fmt.Sprintf("  to sql { url = \"sqlite://o.db\", insert_query = \"INSERT INTO t (id) VALUES (${%s}) ON CONFLICT (id) DO NOTHING\" }\n", tmpl)
	case 2: // the key is a Mongo id_field
		body = fmt.Sprintf("  to mongodb { url = \"mongodb://h\", database = \"d\", collection = \"c\", id_field = \"${%s}\" }\n", tmpl)
	default: // the key is the id, read by a Mongo id_field, behind a stable dedup
		body = "  ${ID}\n  dedup { key = payload.order_id }\n  to mongodb { url = \"mongodb://h\", database = \"d\", collection = \"c\", id_field = \"${meta[\\\"mqb.id\\\"]}\" }\n"
	}
	id := "id " + k.expr
	if strings.Contains(k.expr, "$env") || strings.Contains(k.expr, ";") {
		// The lexer keeps $env inside ${…}: the id reads it through a map.
		id = fmt.Sprintf("map { k = \"${%s}\" }\n  id payload.k", tmpl)
	}
	body = strings.ReplaceAll(body, "${ID}", id)
	return []byte(fmt.Sprintf("route r {\n  guarantee at_least_once\n  from %s\n%s}\n", src, body))
}

// checkPieceRoute compiles the route seed picks and fails when it is
// claimed effectively- or exactly-once with an untrusted key.
func checkPieceRoute(t *testing.T, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	src := fuzzSources[r.IntN(len(fuzzSources))]
	k := fuzzKeys[r.IntN(len(fuzzKeys))]
	text := pieceRoute(seed)
	p, _ := CompileSources([]Source{{"piece.mqb", text}})
	untrusted := k.untrusted && (!k.fileOnly || strings.HasPrefix(src, "file"))
	for _, rt := range p.Routes {
		if untrusted && plan.GuaranteeRank(rt.Guarantee) >= plan.GuaranteeRank(plan.EffectivelyOnce) {
			t.Fatalf("route claimed %s with key %s from %s:\n%s\n%s", rt.Guarantee, k.expr, src, text, VerdictLine(rt))
		}
	}
}

// TestPieceRoutes runs the fuzz property over a fixed set of seeds.
func TestPieceRoutes(t *testing.T) {
	claimed := 0
	for seed := range uint64(2000) {
		checkPieceRoute(t, seed)
		p, _ := CompileSources([]Source{{"piece.mqb", pieceRoute(seed)}})
		if len(p.Routes) == 1 && p.Routes[0].Guarantee == plan.EffectivelyOnce {
			claimed++
		}
	}
	if claimed == 0 {
		t.Error("no generated route is effectively-once: the generator does not reach the prover's proofs")
	}
}

// BenchmarkCompile1000Routes builds a generated file of 1,000 routes,
// parse included.
func BenchmarkCompile1000Routes(b *testing.B) {
	src := thousandRoutes()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, diags := CompileSources([]Source{{"bench.mqb", src}})
		if diags.HasErrors() || len(p.Routes) != 1000 {
			b.Fatalf("bad build: %d routes, %v", len(p.Routes), diags[:min(3, len(diags))])
		}
	}
}

// BenchmarkCheck1000Routes measures the compiler's own stages (resolve,
// check, prove, emit) over an already parsed 1,000-route file.
func BenchmarkCheck1000Routes(b *testing.B) {
	f, diags := lang.Parse("bench.mqb", thousandRoutes())
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, diags := Compile([]*lang.File{f})
		if diags.HasErrors() || len(p.Routes) != 1000 {
			b.Fatalf("bad build: %d routes", len(p.Routes))
		}
	}
}

func thousandRoutes() []byte {
	var sb strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&sb, `route r%d {
  concurrency = 2
  from file { path = "in%d.jsonl" }
  id payload.order_id
  dedup { key = meta["mqb.id"], store = "pebble://state/dedup", ttl = 1h }
  filter payload.total > 0 && payload.kind in ["a", "b"]
  map { total = payload.total * 2 }
  retry { attempts = 3 }
  to sql {
    url = "postgres://mqb:pw@127.0.0.1/shop"
    insert_query = """
      INSERT INTO orders (id, body, total)
      VALUES (${meta["mqb.id"]}, ${payload.body}, ${payload.total})
      ON CONFLICT (id) DO UPDATE SET body = excluded.body
    """
  }
}
`, i, i)
	}
	return []byte(sb.String())
}

// TestNameByResolved checks that the plan carries the effective naming
// scheme and turns source_metadata on under source_position.
func TestNameByResolved(t *testing.T) {
	tests := []struct{ source, sink, nameBy string }{
		{`kafka { url = "k:9092", topic = "t" }`, `object_store { url = "gs://b/p" }`, "source_position"},
		{`nats { url = "nats://h", subject = "s" }`, `object_store { url = "gs://b/p" }`, "write_time"},
		{`kafka { url = "k:9092", topic = "t" }`, `file { path = "out", name_by = auto }`, "write_time"},
		{`kafka { url = "k:9092", topic = "t" }`, `object_store { url = "gs://b/p", idempotency = false }`, "write_time"},
		{`file { path = "a" }`, `file { path = "parts", idempotency = true }`, "source_position"},
	}
	for _, tt := range tests {
		src := fmt.Sprintf("route r {\n from %s\n to %s\n}\n", tt.source, tt.sink)
		p, diags := CompileSources([]Source{{"t.mqb", []byte(src)}})
		if diags.HasErrors() {
			t.Fatalf("%s: %v", src, diags)
		}
		nodes := p.Routes[0].Nodes
		sink := nodes[len(nodes)-1]
		if got := sink.Attrs["name_by"].Str; got != tt.nameBy {
			t.Errorf("%s: name_by = %s, want %s", src, got, tt.nameBy)
		}
		if sm, ok := nodes[0].Attrs["source_metadata"]; ok && sm.Bool != (tt.nameBy == "source_position") {
			t.Errorf("%s: source_metadata = %v", src, sm.Bool)
		}
	}
}

// TestSourcePremiseTargetRedacted: a source premise whose target is a url
// (object_store's) names it without its user's password, in the plan as in
// the verdict.
func TestSourcePremiseTargetRedacted(t *testing.T) {
	src := `route lake {
  from object_store { url = "s3://AKIAX:sekret@bucket/in/", format = json }
  to file { path = "out.jsonl" }
}
`
	p, diags := CompileSources([]Source{{"t.mqb", []byte(src)}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var b bytes.Buffer
	if err := p.WriteJSON(&b, false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "sekret") || !strings.Contains(b.String(), `"kind":"increasing_id"`) {
		t.Errorf("plan shows the password, or carries no increasing_id premise:\n%s", b.String())
	}
}
