package lang

import (
	"strings"
	"testing"
)

func TestParseForms(t *testing.T) {
	src := `# comment
route r {
  guarantee effectively_once
  concurrency = 4, batch_size = 10
  from file { path = "a.jsonl" }   // trailing
  id payload.order_id
  filter payload.total > 0 && payload.kind in ["a", "b"]
  map {
    total = payload.total * 2
  }
  dlq { to file { path = "dlq.jsonl" } }
  to switch { on = meta["x"]  case "a" { to ref enrich }  default { to file { path = "x" } } }
}
output enrich = http { url = "http://127.0.0.1:1" }
`
	f, diags := Parse("t.mqb", []byte(src))
	if len(diags) != 0 {
		t.Fatalf("diags: %v", diags)
	}
	if len(f.Decls) != 2 || f.Decls[0].Route == nil || f.Decls[1].Endpoint == nil {
		t.Fatalf("decls: %+v", f.Decls)
	}
	items := f.Decls[0].Route.Body.Items()
	var keys []string
	for _, it := range items {
		keys = append(keys, it.Key.Name)
	}
	if got := strings.Join(keys, " "); got != "guarantee concurrency batch_size from id filter map dlq to" {
		t.Fatalf("keys = %q", got)
	}
	if got := items[4].Arg.Text(f.Src); got != "payload.order_id" {
		t.Errorf("id expr = %q", got)
	}
	if got := items[5].Arg.Text(f.Src); got != `payload.total > 0 && payload.kind in ["a", "b"]` {
		t.Errorf("filter expr = %q", got)
	}
	sw := items[8].Body.Items()
	if len(sw) != 3 || sw[1].Label == nil || sw[1].Body.Items()[0].Ref.Name != "enrich" {
		t.Errorf("switch items wrong: %+v", sw)
	}
	if f.Decls[0].Route.Pos.Line != 2 || items[3].Kind.Pos.Column != 8 {
		t.Errorf("positions: route %v kind %v", f.Decls[0].Route.Pos, items[3].Kind.Pos)
	}
	if len(f.Comments) != 2 {
		t.Errorf("comments = %d", len(f.Comments))
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string // "line:col code summary-substring"
	}{
		{"unterminated string", "route r {\n  from file { path = \"a }\n}\n", []string{"2:22 E002 unterminated string"}},
		{"bad duration", "route r {\n  dedup { ttl = 10years }\n}\n", []string{"2:17 E002 invalid duration"}},
		{"two broken routes", "route a {\n  from file {\n}\nroute b {\n  to = = 1\n}\nroute c { }\n", []string{"4:1 E001 a block is not closed", "5:8 E001"}},
		{"missing comma", "route r {\n  from file { path = \"a\" mode = consume }\n}\n", []string{"2:26 E001 expected a newline or a comma"}},
		{"stray char", "route r { @ }\n", []string{"1:11 E001 unexpected character"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := Parse("t.mqb", []byte(tt.src))
			if len(diags) < len(tt.want) {
				t.Fatalf("got %d diagnostics %v, want %d", len(diags), diags, len(tt.want))
			}
			for i, w := range tt.want {
				d := diags[i]
				got := d.Range.Start.String()[len("t.mqb:"):] + " " + d.Code + " " + d.Summary
				if !strings.HasPrefix(got, w) {
					t.Errorf("diag %d = %q, want prefix %q", i, got, w)
				}
			}
		})
	}
}

func TestTemplate(t *testing.T) {
	toks, _ := Lex("t", []byte(`"a ${payload:order_id} b ${metadata:mqb.id} ${meta["k"]} \$x"`))
	parts, diags := SplitTemplate(toks[0])
	if len(diags) != 0 {
		t.Fatal(diags)
	}
	var got []string
	for _, p := range parts {
		if p.IsExpr() {
			got = append(got, "{"+p.Expr+"}")
		} else {
			got = append(got, p.Lit)
		}
	}
	want := `a |{payload.order_id}| b |{meta["mqb.id"]}| |{meta["k"]}| $x`
	if g := strings.Join(got, "|"); g != want {
		t.Errorf("got %q want %q", g, want)
	}
	if parts[1].Range.Start.Col != 6 {
		t.Errorf("placeholder col = %d", parts[1].Range.Start.Col)
	}
}
