package compiler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/plan"
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
	tests := []struct {
		source, steps, key string
		stable             bool
	}{
		{`file { path = "a" }`, "", "payload.id", true},
		{`file { path = "a" }`, "", "message_id", false},
		{`kafka { url = "k:9092", topic = "t" }`, "", "message_id", true},
		{`file { path = "a" }`, "", `meta["mqb.src.offset"]`, true},
		{`file { path = "a", mode = subscribe }`, "", `meta["mqb.src.offset"]`, false},
		{`postgres_cdc { url = "postgres://x", publication = "p", slot_name = "s" }`, "", `meta["postgres.lsn"]`, true},
		{`file { path = "a" }`, "", `meta["postgres.lsn"]`, false},
		{`file { path = "a" }`, "id payload.id", `meta["mqb.id"]`, true},
		{`file { path = "a" }`, "id message_id", `meta["mqb.id"]`, false},
		{`file { path = "a" }`, "", `string(now())`, false},
		{`file { path = "a" }`, "", `env("X") + payload.a`, true},
		{`file { path = "a" }`, "", `meta["other"]`, false},
		{`file { path = "a" }`, "map { id = string(now()) }", `payload.id`, false},
		{`file { path = "a" }`, "map { id = payload.x }", `payload.id`, true},
	}
	for _, tt := range tests {
		src := fmt.Sprintf("route r {\n from %s\n %s\n dedup { key = %s }\n to nats { url = \"nats://h\", subject = \"s\" }\n}\n", tt.source, tt.steps, tt.key)
		p, diags := CompileSources([]Source{{"t.mqb", []byte(src)}})
		if diags.HasErrors() {
			t.Errorf("%s: unexpected errors %v", src, diags)
			continue
		}
		var got *plan.Value
		for _, n := range p.Routes[0].Nodes {
			if n.Kind == "dedup" {
				v := n.Attrs["key"]
				got = &v
			}
		}
		if got == nil || got.Stable != tt.stable {
			t.Errorf("key %s after %q from %s: stable = %v, want %v", tt.key, tt.steps, tt.source, got != nil && got.Stable, tt.stable)
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
	})
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
